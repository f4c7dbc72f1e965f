"""``ldmatrix`` plans: derived from the fragment layouts, and checked against a model of the PTX semantics."""

import numpy as np
import pytest

from iron.core import dtypes as D
from iron.codegen.ldmatrix import plan, simulate
from iron.codegen.mma import CUDA_MMA_SYNC_M16N8K16, PORTABLE, BitFieldLayout


def _codes(rows: int, cols: int, memory: str) -> np.ndarray:
    """A memory image (major x minor) whose every element encodes its fragment (row, col) as row*1000 + col."""
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    codes = r * 1000 + c
    return codes if memory == "row" else codes.T


@pytest.mark.parametrize("role, rows, cols, memory, count, trans", [
    ("a", 16, 16, "row", 4, False),   # A row-major in shared memory ([m][k])
    ("a", 16, 16, "col", 4, True),    # A stored k-major ([k][m])
    ("b", 16, 8, "col", 2, False),    # B stored n-major ([n][k]: an nn.Linear weight)
    ("b", 16, 8, "row", 2, True),     # B row-major ([k][n])
])
def test_mma_sync_fragments_load_with_one_ldmatrix(role, rows, cols, memory, count, trans):
    layout = CUDA_MMA_SYNC_M16N8K16.fragment_layout(role, rows, cols, D.bf16)
    p = plan(layout, memory)
    assert p is not None and (p.count, p.trans) == (count, trans)
    got = simulate(p, _codes(rows, cols, memory))
    table = layout.to_table()
    want = table[..., 0] * 1000 + table[..., 1]
    np.testing.assert_array_equal(got, want)


def test_a_wrong_direction_is_caught_by_the_model():
    """The model is strong enough to tell a non-transposing load from a transposing one."""
    layout = CUDA_MMA_SYNC_M16N8K16.fragment_layout("a", 16, 16, D.f16)
    p = plan(layout, "row")
    flipped = type(p)(p.count, not p.trans, p.origins)
    table = layout.to_table()
    assert not np.array_equal(simulate(flipped, _codes(16, 16, "row")), table[..., 0] * 1000 + table[..., 1])


def test_layouts_that_are_not_8x8_tiles_get_no_plan():
    # Portable layouts stripe elements across lanes: no register pair is a tile row.
    assert plan(PORTABLE.fragment_layout("a", 16, 16, D.f16, 32), "row") is None
    # Lane bits in the pair's position: registers 2i and 2i+1 are not neighbours in memory.
    scattered = BitFieldLayout(16, 16, 32, 8, row_bits=("r0", "l3", "l4", "r1"), col_bits=("l2", "l0", "l1", "r2"))
    assert plan(scattered, "row") is None and plan(scattered, "col") is None
    with pytest.raises(ValueError, match="'row' or 'col'"):
        plan(CUDA_MMA_SYNC_M16N8K16.fragment_layout("a", 16, 16, D.f16), "diagonal")
