"""Asynchronous barriers: their meaning and misuse on the interpreter, located errors in the frontend, the
capability check of targets without them, and their CUDA form.  The pipelined ring that uses all of them runs
in the corpus (tests/corpus/memory.py, barrier_ring) on the interpreter, lavapipe and the GPU, and is compiled
for every target."""

import numpy as np
import pytest
from lang_support import assert_located

from iron import In, T, Tensor, f16, f32, func, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import profile
from iron.core.errors import (IronCompileError, KernelTypeError, SharedMemoryRaceError, UnsupportedOnTarget,
                              UnsupportedSyntaxError)
from iron.lang import (async_barriers, barrier_arrive, barrier_wait, copy_async, copy_async_barrier, copy_tile,
                       shared, thread_id)
from iron.runtime.interp.faults import InterpError

HERE = __file__
G = 32


@kernel(variants(MISUSE=["none", "no_arrive", "wrong_parity", "over_arrive", "untied", "bad_index"]))
def mirror(src: In[f32], out: Tensor[f32]):
    """One phase: every thread copies its element into shared memory, ties the copy to the barrier and
    arrives; after the wait it reads the mirrored element, which another thread brought."""
    full = async_barriers(1, G // 2 if MISUSE == "over_arrive" else G)
    s = shared(f32, G)
    t = thread_id(0)
    copy_async(s, t, src, t, 1)
    if MISUSE != "untied":
        copy_async_barrier(full, 0)
    if MISUSE == "bad_index":
        barrier_arrive(full, t // 16)
    elif MISUSE != "no_arrive":
        barrier_arrive(full, 0)
    barrier_wait(full, 0, 1 if MISUSE == "wrong_parity" else 0)
    out[t] = s[G - 1 - t]


def _run(k, **kw):
    src = np.arange(1, G + 1, dtype=np.float32)
    out = np.full(G, -1, np.float32)
    k.launch(src, out, grid=(G,), group=(G,), backend="interp", **kw)
    return src, out


def test_a_tied_copy_lands_when_the_phase_completes() -> None:
    src, out = _run(mirror.variant(MISUSE="none"))
    np.testing.assert_array_equal(out, src[::-1])


def test_an_untied_copy_has_not_landed_at_the_wait() -> None:
    """Nothing ties the copy to the barrier and no copy_async_wait covers it: the read sees the old zeros, as
    a GPU may show it, so the test of such a kernel fails."""
    _, out = _run(mirror.variant(MISUSE="untied"))
    np.testing.assert_array_equal(out, 0)


@pytest.mark.parametrize("misuse, message", [
    ("no_arrive", r"waits on barrier 0 of 'full' for a phase of parity 0, but phase 0 is still in progress "
                  r"\(0 of 32 arrivals, 0 bytes outstanding\).*would never return"),
    ("wrong_parity", r"parity 1, but phase 1 is still in progress \(0 of 32 arrivals"),
    ("over_arrive", r"32 threads of group 0 arrive on barrier 0 of 'full' at once, but its phase 0 needs only 16"),
    ("bad_index", r"barrier 1 of 'full' is out of range \(it holds 1\) in thread 16"),
])
def test_misuse_is_an_error_at_the_op(misuse, message) -> None:
    with pytest.raises(InterpError, match=message) as info:
        _run(mirror.variant(MISUSE=misuse))
    assert "test_async_barriers.py" in str(info.value)


@kernel(variants(WAIT=[True, False]))
def handoff(src: In[f32], out: Tensor[f32]):
    """The lower half of the group writes shared memory and arrives; the upper half waits and reads it.  The
    wait orders the writes before the reads; without it the race check reports them."""
    half = async_barriers(1, G // 2)
    s = shared(f32, G // 2)
    t = thread_id(0)
    if t < G // 2:
        s[t] = src[t] * 2.0
        barrier_arrive(half, 0)
    else:
        if WAIT:
            barrier_wait(half, 0, 0)
        out[t] = s[t - G // 2]


def test_a_wait_by_some_threads_orders_the_arrivals_before_them() -> None:
    src, out = _run(handoff.variant(WAIT=True))
    np.testing.assert_array_equal(out[G // 2:], src[:G // 2] * 2)
    with pytest.raises(SharedMemoryRaceError):
        _run(handoff.variant(WAIT=False))


@pytest.mark.parametrize("target", ["spirv", "metal", "hip"])
def test_targets_without_them_refuse_a_wait_some_threads_skip(target) -> None:
    """There a wait is a group barrier: the same kernel compiles for CUDA and is refused, located, elsewhere."""
    ir = handoff.ir(WAIT=True)
    assert "mbarrier.try_wait" in emit_kernel(run_pipeline(ir, PassContext.for_target("cuda")), "cuda").source
    with pytest.raises(UnsupportedOnTarget, match=rf"barrier_wait\(\) inside an if whose condition depends on the "
                                                  rf"thread.*{target}.* has no asynchronous barriers") as info:
        emit_kernel(run_pipeline(ir, PassContext.for_target(target)), target)
    assert_located(info.value, HERE, "barrier_wait(half, 0, 0)")


@kernel(variants(ARCH_BYTES=[0, 4096]))
def announce(src: In[f32], out: Tensor[f32]):
    bars = async_barriers(2)
    s = shared(f32, G)
    t = thread_id(0)
    copy_async(s, t, src, t, 1)
    copy_async_barrier(bars, 1)
    if t == 0:
        barrier_arrive(bars, 1, ARCH_BYTES)
    barrier_wait(bars, 1, 0)
    out[t] = s[t]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_spells_them_as_mbarriers(arch) -> None:
    def source(nbytes: int) -> str:
        ir = run_pipeline(announce.ir(ARCH_BYTES=nbytes), PassContext.for_target("cuda"))
        return emit_kernel(ir, "cuda", profile("cuda", arch)).source

    plain, announcing = source(0), source(4096)
    assert "__shared__ unsigned long long bars[2];" in plain  # among the shared arrays
    assert 'mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"((unsigned int)__cvta_generic_to_shared(&bars[iron_b])), ' \
           '"r"(1)' in plain
    assert "cp.async.mbarrier.arrive.shared::cta.b64 [%0];" in plain  # no .noinc: the phase waits, net arrivals 0
    assert ("mbarrier.try_wait.parity" if arch == "sm_90" else "mbarrier.test_wait.parity") in plain
    assert ("fence.mbarrier_init" in plain) == (arch == "sm_90")
    assert "mbarrier.arrive.shared::cta.b64 st, [%0];" in plain
    if arch == "sm_90":
        assert 'mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\\n}" :: "r"' in announcing
        assert '"r"(4096)' in announcing
    else:  # no byte counts before sm_90: a tile copy holds the phase open with cp.async.mbarrier.arrive
        assert "expect_tx" not in announcing


def test_the_interpreter_waits_for_announced_bytes() -> None:
    """Bytes announced with no tile copy to bring them keep the phase open: the wait would hang."""
    src = np.ones(G, np.float32)
    with pytest.raises(InterpError, match=r"phase 0 is still in progress \(1 of 1 arrivals, 4096 bytes outstanding"):
        announce.variant(ARCH_BYTES=4096).launch(src, np.zeros(G, np.float32), grid=(G,), group=(G,),
                                                 backend="interp")
    out = np.zeros(G, np.float32)
    announce.variant(ARCH_BYTES=0).launch(src, out, grid=(G,), group=(G,), backend="interp")
    np.testing.assert_array_equal(out, src)


@kernel
def made_in_a_loop(out: Tensor[f32], n: int):
    for i in range(n):
        bars = async_barriers(1)
        barrier_arrive(bars, 0)


@func
def helper_makes_them():
    return async_barriers(3)


@kernel
def made_in_a_helper(out: Tensor[f32]):
    bars = helper_makes_them()
    barrier_arrive(bars, 0)


@kernel
def wait_on_shared(out: Tensor[f32]):
    s = shared(f32, 4)
    barrier_wait(s, 0, 0)


@kernel
def constant_index_out_of_range(out: Tensor[f32]):
    bars = async_barriers(2)
    barrier_arrive(bars, 1 + 1)


@kernel
def negative_bytes(out: Tensor[f32]):
    bars = async_barriers(2)
    barrier_arrive(bars, 0, -4)


@kernel
def no_barriers(out: Tensor[f32]):
    bars = async_barriers(0)


@pytest.mark.parametrize("k, error, message, snippet", [
    (made_in_a_loop, UnsupportedSyntaxError, "async_barriers\\(\\) inside a helper or under run-time control flow",
     "async_barriers(1)"),
    (made_in_a_helper, UnsupportedSyntaxError, "inside a helper", "async_barriers(3)"),
    (wait_on_shared, KernelTypeError, "barrier_wait\\(\\) takes barriers made by async_barriers\\(\\), got the shared "
                                      "array 's'", "s, 0, 0)"),
    (constant_index_out_of_range, KernelTypeError, "barrier 2 of 2", "1 + 1"),
    (negative_bytes, KernelTypeError, "announces 0 to 1048575 bytes, got -4", "-4)"),
    (no_barriers, KernelTypeError, "at least one barrier taking at least one arrival, got count=0",
     "async_barriers(0)"),
])
def test_frontend_misuse_is_a_located_error(k, error, message, snippet) -> None:
    with pytest.raises(error, match=message) as info:
        k.ir()
    assert isinstance(info.value, IronCompileError)
    assert_located(info.value, HERE, snippet)


# ---------------------------------------------------------------- tile copies (their layouts, edges and dtypes run
# in the corpus: tests/corpus/memory.py, tile_copies)

@kernel(variants(ORDER=["copy_first", "arrive_first", "too_few_bytes", "no_wait"]))
def one_tile(a: In[f32], out: Tensor[f32], m: int):
    bars = async_barriers(1)
    s = shared(f32, 8 * 32)
    t = thread_id(0)
    if t == 0:
        if ORDER == "arrive_first":
            barrier_arrive(bars, 0, 1024)
        copy_tile(s, 0, a, (m, 32), (0, 0), (8, 32), bars, 0, layout="rows")
        if ORDER != "arrive_first":
            barrier_arrive(bars, 0, 512 if ORDER == "too_few_bytes" else 1024)
    if ORDER != "no_wait":
        barrier_wait(bars, 0, 0)
    for r in range(8):
        out[r * 32 + t] = s[r * 32 + t]


def _one_tile(order: str) -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(1, 8 * 32 + 1, dtype=np.float32)
    out = np.full(8 * 32, -1, np.float32)
    one_tile.variant(ORDER=order).launch(a, out, 8, grid=(G,), group=(G,), backend="interp")
    return a, out


def test_a_tile_lands_when_its_bytes_and_arrivals_are_in() -> None:
    a, out = _one_tile("copy_first")
    np.testing.assert_array_equal(out, a)
    with pytest.raises(SharedMemoryRaceError, match=r"read by thread 1 .* and write by thread 0 .*tile_copy"):
        _one_tile("no_wait")  # nothing orders the landing before the other threads' reads


@pytest.mark.parametrize("order, message", [
    ("arrive_first", "comes after the arrival that announced its bytes on barrier 0 of 'bars': issue the copies first"),
    ("too_few_bytes", r"phase 0 is still in progress \(1 of 1 arrivals, tile copies brought 512 bytes more than the "
                      r"arrivals announced\)"),
])
def test_tile_copy_misuse_is_an_error(order, message) -> None:
    with pytest.raises(InterpError, match=message):
        _one_tile(order)


@kernel
def misaligned_tile(a: In[f32], out: Tensor[f32], at: int):
    bars = async_barriers(1)
    s = shared(f32, 2048)
    copy_tile(s, at, a, (8, 32), (0, 0), (8, 32), bars, 0)


def test_a_swizzled_tile_off_its_atom_is_an_error() -> None:
    with pytest.raises(InterpError, match="a sw128 tile starts on a 1024-byte boundary; element 64 of 's' is byte 256"):
        misaligned_tile.launch(np.zeros(256, np.float32), np.zeros(1, np.float32), 64, grid=(1,), group=(1,),
                               backend="interp")


@kernel
def tile_from_column(a: In[T], out: Tensor[T], col: int):
    bars = async_barriers(1)
    s = shared(T, 8 * 64)
    if thread_id(0) == 0:
        copy_tile(s, 0, a, (8, 64), (0, col), (8, 64 // (T.itemsize // 2)), bars, 0, layout="rows")
        barrier_arrive(bars, 0, 8 * 128)
    barrier_wait(bars, 0, 0)
    out[thread_id(0)] = s[thread_id(0)]


@pytest.mark.parametrize("dtype, col, ok", [(np.float32, 4, True), (np.float32, -4, True), (np.float32, 6, False),
                                            (np.float16, 8, True), (np.float16, 4, False), (np.float16, -1, False)])
def test_a_tile_starts_on_a_16_byte_column(dtype, col, ok) -> None:
    """TMA's rule, everywhere: the H200 raises an illegal instruction for a box starting at column 3 or 5 of an
    f32 matrix."""
    a = np.arange(8 * 64, dtype=dtype)
    out = np.zeros(G, dtype)

    def launch():
        tile_from_column.launch(a, out, col, grid=(G,), group=(G,), backend="interp")
    if ok:
        launch()
        want = [a[j + col] if 0 <= j + col < 64 else 0 for j in range(G)]
        np.testing.assert_array_equal(out, np.array(want, dtype))
    else:
        per = 16 // np.dtype(dtype).itemsize
        with pytest.raises(InterpError, match=f"starts on a column that is a multiple of {per} .*; column {col} in"):
            launch()


@kernel(variants(CASE=list(range(10))))
def bad_tile(a: In[f32], out: Tensor[f32]):
    bars = async_barriers(1)
    s = shared(f32, 4096)
    if CASE == 0:
        copy_tile(s, 0, a, (8, 64), (0, 0), (8, 64), bars, 0)
    elif CASE == 1:
        copy_tile(s, 0, a, (8, 64), (0, 0), (4, 32), bars, 0)
    elif CASE == 2:
        copy_tile(s, 0, a, (8, 64), (0, 0), (8, 6), bars, 0, layout="rows")
    elif CASE == 3:
        copy_tile(s, 0, a, (8, 64), (0, 0), (512, 4), bars, 0, layout="rows")
    elif CASE == 4:
        copy_tile(s, 0, a, (8, 64), (0, 0), (8, 32), bars, 0, layout="tiled")
    elif CASE == 5:
        copy_tile(s, 8, a, (8, 64), (0, 0), (8, 32), bars, 0)
    elif CASE == 6:
        copy_tile(s, 0, a, 64, (0, 0), (8, 32), bars, 0)
    elif CASE == 7:
        copy_tile(s, 0, a, (2, 8, 64), (0, 0), (1, 8, 32), bars, 0)
    elif CASE == 8:
        copy_tile(s, 0, a, (2, 3, 8, 64), (0, 0, 0, 0), (2, 3, 2, 32), bars, 0)
    else:
        copy_tile(s, 0, a, (1, 1, 1, 1, 8, 64), (0, 0, 0, 0, 0, 0), (1, 1, 1, 1, 8, 32), bars, 0)


@pytest.mark.parametrize("case, message", list(enumerate([
    r"a sw128 tile row spans 128 bytes \(32 x f32\); the box's 64 columns are 256 bytes",
    "a sw128 tile holds whole 8-row atoms; the box has 4 rows",
    "a rows tile row spans a multiple of 16 bytes; the box's 6 columns",
    "the box is 1 to 256 elements along each axis, got 512 x 4",
    "layout is one of 'rows', 'sw128', got the string 'tiled'",
    "a sw128 tile starts on a 1024-byte boundary; element 8 of f32 is byte 32",
    r"copy_tile\(\)'s shape is a tuple of 2 to 5 entries, outermost first \(\(rows, cols\) for a matrix\), got the "
    "constant 64",
    r"copy_tile\(\)'s coords has one entry per axis of the box \(3\), got 2",
    "a sw128 tile holds whole 8-row atoms; the box has 12 rows",
    r"copy_tile\(\)'s box is a tuple of 2 to 5 entries",
])))
def test_copy_tile_misuse_is_a_compile_error(case, message) -> None:
    with pytest.raises(KernelTypeError, match=message) as info:
        bad_tile.ir(CASE=case)
    assert "test_async_barriers.py" in str(info.value)



# ---------------------------------------------------------------- tile copies in hardware (TMA, CUDA sm_90)

@kernel(variants(ROWS=["param", "computed"]))
def two_maps(a: In[f32], b: In[f32], out: Tensor[f32], m: int, n: int):
    bars = async_barriers(1)
    s = shared(f32, 4 * 256)
    rows = m if ROWS == "param" else m * 2
    if thread_id(0) == 0:
        copy_tile(s, 0, a, (rows, 32), (0, 0), (8, 32), bars, 0, layout="rows")
        copy_tile(s, 256, a, (rows, 32), (8, 0), (8, 32), bars, 0, ld=32, layout="rows")  # the same map
        copy_tile(s, 512, b, (n, 64), (0, 0), (16, 32), bars, 0, ld=64)
        barrier_arrive(bars, 0, 2 * 1024 + 2048)
    barrier_wait(bars, 0, 0)
    out[thread_id(0)] = s[thread_id(0)]


def _cuda(ir, arch: str):
    return emit_kernel(run_pipeline(ir, PassContext.for_target("cuda")), "cuda", profile("cuda", arch))


def test_sm90_copies_tiles_with_tensor_maps_in_the_parameter_block() -> None:
    from iron.runtime.cuda.manifest import abi_from_json
    from iron.runtime.cuda.packer import ArgBuffer

    emitted = _cuda(two_maps.ir(ROWS="param"), "sm_90")
    abi, source = emitted.abi, emitted.source
    assert [(m.tensor, m.rows, m.cols, m.ld, m.box, m.layout) for m in abi.maps] == [
        ("a", "m", 32, 32, (8, 32), "rows"), ("b", "n", 64, 64, (16, 32), "sw128")]
    assert [m.offset for m in abi.maps] == [64, 192] and abi.params_size == 320
    assert abi_from_json(abi.to_json()) == abi
    assert ArgBuffer(abi).struct.size == 8 * 3 + 320
    assert "const __grid_constant__ IronParams p" in source and "iron_tensor_map iron_map_1;  // offset 192" in source
    assert source.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 3
    assert source.count("&p.iron_map_0") == 2 and "if (tile_2 & 1023u) __trap();" in source
    older = _cuda(two_maps.ir(ROWS="param"), "sm_80")
    assert not older.abi.maps and "cp.async.bulk" not in older.source and "copy_tile: 16 x 32 f32" in older.source


@pytest.mark.toolchain
def test_the_compiled_kernel_keeps_the_maps_64_byte_aligned() -> None:
    """TMA reads a map in parameter memory 64-byte aligned: ptxas places the block (alignas 64) so."""
    import struct

    from iron.codegen.toolchains import nvrtc
    from iron.codegen.toolchains.cubin import nv_info_attributes
    from iron.runtime.cuda.manifest import abi_mismatch, cubin_params

    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    emitted = _cuda(two_maps.ir(ROWS="param"), "sm_90")
    cubin = nvrtc.compile_cuda(emitted.source, arch="sm_90").binary
    assert abi_mismatch(emitted.abi, cubin_params(cubin, emitted.entry)) is None
    offsets = {}
    for attr, at, size in nv_info_attributes(cubin, f".nv.info.{emitted.entry}"):
        if attr == 0x17 and size >= 12:  # EIATTR_KPARAM_INFO: index, ordinal, offset, flags
            _, ordinal, offset, _ = struct.unpack_from("<IHHI", cubin, at)
            offsets[ordinal] = offset
    # The parameters start at byte 0x210 of constant bank 0: the block at 48 is at 0x240 (the H200 printed its
    # maps' generic addresses 64-byte aligned too).
    assert offsets == {0: 0, 1: 8, 2: 16, 3: 48}


def test_sm90_needs_a_map_the_host_can_build() -> None:
    with pytest.raises(UnsupportedOnTarget, match="copy_tile's rows is computed in the kernel") as info:
        _cuda(two_maps.ir(ROWS="computed"), "sm_90")
    assert_located(info.value, HERE, "copy_tile(s, 0, a, (rows, 32)")
    assert "cp.async.bulk" not in _cuda(two_maps.ir(ROWS="computed"), "sm_80").source


def test_a_launch_encodes_what_tma_can_copy() -> None:
    """The driver's encoding of a map at one launch: innermost dimension first, and TMA's rules as errors."""
    from iron.codegen.tensor_maps import encoding

    m = _cuda(two_maps.ir(ROWS="param"), "sm_90").abi.maps[1]
    enc = encoding(m, 0x10000, {"m": 3, "n": 5}, 5 * 64)
    assert (enc.dims, enc.strides_bytes, enc.box, enc.swizzle_128b) == ((64, 5), (256,), (32, 16), True)
    for address, scalars, elements, message in [
        (0x10004, {"n": 5}, 320, "16-byte aligned"),
        (0x10000, {"n": 6}, 320, "ends past the tensor's 320 elements"),
        (0x10000, {"n": 0}, 320, "the matrix is empty"),
    ]:
        with pytest.raises(ValueError, match=message):
            encoding(m, address, scalars, elements)


# ---------------------------------------------------------------- boxes with outer axes (a convolution's input taps)

@kernel
def box_taps(x: In[f16], out: Tensor[f16], n: int, h: int, w: int, c: int, y0: int):
    """An 8 x 8 pixel box of 64 channels of an (n, h, w, c) image, one pixel up and left of (y0, 0)."""
    bars = async_barriers(1)
    s = shared(f16, 64 * 64)
    if thread_id(0) == 0:
        copy_tile(s, 0, x, (n, h, w, c), (n - 1, y0 - 1, -1, 64), (1, 8, 8, 64), bars, 0)
        barrier_arrive(bars, 0, 64 * 64 * 2)
    barrier_wait(bars, 0, 0)
    out[thread_id(0)] = s[thread_id(0)]


def test_sm90_copies_boxes_with_outer_axes_by_one_instruction() -> None:
    """A box of rank 4 is one cp.async.bulk.tensor.4d, coordinates innermost first; its map knows the outer
    extents, and a launch encodes every axis's extent and stride (outer axes dense over the rows)."""
    from iron.codegen.tensor_maps import encoding
    from iron.runtime.cuda.manifest import abi_from_json

    emitted = _cuda(box_taps.ir(), "sm_90")
    (m,) = emitted.abi.maps
    assert (m.tensor, m.rows, m.cols, m.ld, m.box, m.outer, m.box_outer) == \
        ("x", "w", "c", "c", (8, 64), ("n", "h"), (1, 8))
    assert abi_from_json(emitted.abi.to_json()) == emitted.abi
    src = emitted.source
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in src
    assert '"[%0], [%1, {%2, %3, %4, %5}], [%6];"' in src and "copy_tile: 1 x 8 x 8 x 64 f16" in src
    scalars = {"n": 2, "h": 6, "w": 5, "c": 128}
    enc = encoding(m, 0x10000, scalars, 2 * 6 * 5 * 128)
    assert (enc.dims, enc.strides_bytes, enc.box) == ((128, 5, 6, 2), (256, 1280, 7680), (64, 8, 8, 1))
    with pytest.raises(ValueError, match="a 2 x 6 x 5 x 128 tensor with rows 128 elements apart: the tensor ends past"):
        encoding(m, 0x10000, scalars, 2 * 6 * 5 * 128 - 1)
    assert "cp.async.bulk" not in _cuda(box_taps.ir(), "sm_80").source
