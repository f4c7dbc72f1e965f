"""``store_tile``: a shared tile written to a box of a global matrix, asynchronously up to the issuing thread's
``store_tile_wait``.  Its meaning across tails and layouts runs in the corpus (tests/corpus/memory.py,
tile_stores) on the interpreter, lavapipe and the GPU, compiled for every target; here: the interpreter's
misuse checks, located compile errors, and the CUDA forms (TMA on sm_90 with the map in the parameter block,
the portable loop before)."""

import numpy as np
import pytest
from lang_support import assert_located

from iron import In, Tensor, f32, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import profile
from iron.core.errors import IronCompileError
from iron.lang import barrier, shared, store_tile, store_tile_wait, thread_id
from iron.runtime.interp.faults import InterpError

HERE = __file__


@kernel(variants(MISUSE=["none", "no_wait", "overwrite"]))
def mirror_out(src: In[f32], out: Tensor[f32], m: int):
    """32 threads fill an 8 x 8 tile with the reversed source; thread 0 stores it to the m x 8 matrix ``out``
    at row -2 (two rows above the matrix, which the store skips)."""
    s = shared(f32, 64)
    t = thread_id(0)
    s[t] = src[63 - t]
    s[t + 32] = src[31 - t]
    barrier()
    if t == 0:
        store_tile(s, 0, out, (m, 8), (-2, 0), (8, 8))
        if MISUSE == "overwrite":
            s[0] = 0.0
        if MISUSE != "no_wait":
            store_tile_wait()  # wait


def _run(misuse: str) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(64, dtype=np.float32)
    out = np.full(6 * 8, -1, np.float32)
    mirror_out.variant(MISUSE=misuse).launch(src, out, 6, grid=(32,), group=(32,), backend="interp")
    return src, out


def test_the_wait_writes_the_rows_inside_the_matrix() -> None:
    src, out = _run("none")
    np.testing.assert_array_equal(out, src[::-1][16:])  # tile rows 2..7 are matrix rows 0..5


def test_a_store_never_waited_for_never_writes() -> None:
    """The matrix keeps its old contents here, as a GPU may leave it: a kernel that forgets the wait fails."""
    _, out = _run("no_wait")
    np.testing.assert_array_equal(out, -1)


def test_a_tile_changed_before_the_wait_is_an_error_at_the_wait() -> None:
    with pytest.raises(InterpError, match="changed before this store_tile_wait") as info:
        _run("overwrite")
    assert f"{HERE}:{assert_line('store_tile_wait()  # wait')}:" in str(info.value)


def assert_line(snippet: str) -> int:
    from lang_support import where

    return where(HERE, snippet)[0]


@kernel(variants(CASE=["global_tile", "dtype", "box"]))
def bad(src: In[f32], out: Tensor[f32], h: Tensor[f32]):
    s = shared(f32, 64)
    if CASE == "global_tile":
        store_tile(h, 0, out, (8, 8), (0, 0), (8, 8))  # global_tile
    elif CASE == "dtype":
        store_tile(s, 0, src, (8, 8), (0, 0), (8, 8))  # dtype
    else:
        store_tile(s, 0, out, (8, 8), (0, 0), (8, 3))  # box


@pytest.mark.parametrize("case,message", [
    ("global_tile", "stores from a shared array into a tensor argument"),
    ("dtype", "read-only"),
    ("box", "rows tile row spans a multiple of 16 bytes"),
])
def test_misuse_is_a_located_compile_error(case, message) -> None:
    with pytest.raises(IronCompileError, match=message) as info:
        bad.variant(CASE=case).ir()
    assert info.value.line == assert_line(f"# {case}")


def _cuda(arch: str):
    ir = mirror_out.ir(MISUSE="none")
    return emit_kernel(run_pipeline(ir, PassContext.for_target("cuda")), "cuda", profile("cuda", arch))


def test_sm90_stores_from_the_thread_unless_tma_stores_are_on() -> None:
    """The TMA form is an option (IRON_TMA_STORE, not yet timed on the GPU): by default sm_90 stores the tile
    from the issuing thread, with no tensor map for it."""
    emitted = _cuda("sm_90")
    assert not emitted.abi.maps and "cp.async.bulk" not in emitted.source
    assert "store_tile: 8 x 8 f32" in emitted.source


def test_sm90_stores_through_a_tensor_map_after_fenced_barriers(require_toolchain, monkeypatch) -> None:
    monkeypatch.setenv("IRON_TMA_STORE", "1")
    emitted = _cuda("sm_90")
    source = emitted.source
    assert [(m.tensor, m.rows, m.cols, m.ld, m.box, m.layout) for m in emitted.abi.maps] == [
        ("out", "m", 8, 8, (8, 8), "rows")]
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in source
    assert "cp.async.bulk.commit_group;" in source and "cp.async.bulk.wait_group 0;" in source
    # a box from a negative row or column faults in TMA: such a store takes the thread's loop at run time
    tma, loop = source.split("} else\n")
    assert "if ((int)(-2) >= 0 && (int)(0) >= 0) {  // store_tile: 8 x 8 f32" in tma
    assert "cp.async.bulk.tensor" in tma and loop.lstrip().startswith("{  // store_tile: 8 x 8 f32")
    assert "if (iron_gr >= 0 && iron_gr < m" in loop and "cp.async.bulk.tensor" not in loop
    # the tile's writers fence their writes to the async proxy before the barrier the store follows
    assert "iron_async_proxy_barrier()" in source
    older = _cuda("sm_80")
    assert not older.abi.maps and "cp.async.bulk" not in older.source and "store_tile: 8 x 8 f32" in older.source
    require_toolchain("nvrtc")
    from iron.codegen.toolchains import nvrtc

    nvrtc.compile_cuda(source, arch="sm_90")
