"""2-D transpose through shared-memory tiles: out[c, r] = x[r, c] for a row-major (rows, cols) x, or for each
matrix of a batch (batch, rows, cols) (grid axis 2: NCHW to NHWC is a batch of (C, H W) transposes).

A group of (32, 8) threads moves one 32 x 32 tile: each thread reads 4 rows of it (coalesced along
x's rows) into a shared tile padded to 33 columns, then writes 4 rows of the transposed tile
(coalesced along out's rows).  The padding puts column reads of the tile on 32 different banks.  The
tile is held in f32 for every T (f16/bf16 widen and narrow back exactly), so the 4-byte bank argument
holds for all three dtypes.
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, kernel, variants
from iron.core.errors import LaunchError
from iron.lang import barrier, group_id, num_groups, shared, static_range, thread_id

from . import _host
from ._plans import planned

#: The tile's side; the group is (TILE, TILE // ROWS_PER_THREAD) threads.
TILE = 32
#: Rows of the tile each thread moves, in each direction.
ROWS_PER_THREAD = 4
GROUP = (TILE, TILE // ROWS_PER_THREAD)
#: At most this many groups per grid axis (Vulkan's guaranteed minimum); the kernel loops over the rest.
MAX_GROUPS = 65535


@kernel(variants(T=[f32, f16, bf16]))
def transpose_tiles(x: In[T], out: Tensor[T], rows: int, cols: int, batch: int):
    """out[b, c, r] = x[b, r, c] (offsets b * rows * cols) for b < batch, r < rows, c < cols: a bit-exact copy.

    x: T (f32/f16/bf16), row-major rows x cols, contiguous; out: T, row-major cols x rows.
    Domain: batch * rows * cols < 2**31 (i32 indices); groups of (32, 8) threads; grid: any number of
    groups per axis up to the tile counts (axis 0 over column tiles, axis 1 over row tiles, axis 2 over the
    batch): groups loop over the rest.  Tails: tiles past the last row or column are masked element by
    element.  NaN, Inf and -0.0 are copied bit for bit (f16/bf16 pass through an f32 tile, which is exact).
    """
    tile = shared(f32, (TILE, TILE + 1))
    tx = thread_id(0)
    ty = thread_id(1)
    tiles_c = (cols + (TILE - 1)) // TILE
    tiles_r = (rows + (TILE - 1)) // TILE
    for b in range(group_id(2), batch, num_groups(2)):
        at = b * rows * cols
        for by in range(group_id(1), tiles_r, num_groups(1)):
            for bx in range(group_id(0), tiles_c, num_groups(0)):
                r0 = by * TILE
                c0 = bx * TILE
                for k in static_range(ROWS_PER_THREAD):
                    r = r0 + ty + k * (TILE // ROWS_PER_THREAD)
                    c = c0 + tx
                    if r < rows and c < cols:
                        tile[ty + k * (TILE // ROWS_PER_THREAD), tx] = f32(x[at + r * cols + c])
                barrier()
                for k in static_range(ROWS_PER_THREAD):
                    c = c0 + ty + k * (TILE // ROWS_PER_THREAD)    # out's row
                    r = r0 + tx                                     # out's column
                    if c < cols and r < rows:
                        out[at + c * rows + r] = T(tile[tx, ty + k * (TILE // ROWS_PER_THREAD)])
                barrier()


@planned
def transpose(x: Any, out: Any = None, backend: str | None = None) -> Any:
    """The (cols, rows) transpose of a 2-D (rows, cols) array, or (batch, cols, rows) of a batch (batch, rows,
    cols), as a new contiguous array (or into ``out``)."""
    dt = _host.check_float(x, "transpose")
    shape = _host.shape_of(x)
    if len(shape) not in (2, 3):
        raise LaunchError(f"transpose: expected a 2-D array (rows, cols) or a batch (batch, rows, cols), got shape "
                          f"{shape}")
    out = _host.output("transpose", out, x, (*shape[:-2], shape[-1], shape[-2]), dt, {"x": x})
    _launch_transpose(x, out, *(shape if len(shape) == 3 else (1, *shape)), backend)
    return out


def _launch_transpose(x: Any, out: Any, batch: int, rows: int, cols: int, backend: str | None) -> None:
    """Launch :data:`transpose_tiles` for ``batch`` (rows, cols) matrices of contiguous ``x`` into ``out``."""
    if batch * rows * cols >= 2**31:
        raise LaunchError(f"transpose: {batch} x {rows} x {cols} elements; the kernel indexes with i32 (at most "
                          f"2**31 - 1)")
    if batch and rows and cols:
        gx = min(_host.ceil_div(cols, TILE), MAX_GROUPS)
        gy = min(_host.ceil_div(rows, TILE), MAX_GROUPS)
        transpose_tiles.variant(T=_host.dtype_of(x)).launch(x, out, rows, cols, batch,
                                                            grid=(gx * GROUP[0], gy * GROUP[1], min(batch, MAX_GROUPS)),
                                                            group=GROUP, backend=backend)

__all__ = ["transpose", "transpose_tiles"]
