"""Device-local buffers behind staging copies, against the mapped path (docs/vulkan.md, ``vulkan_staging``).

Every ``device`` test already runs on both paths (conftest.py); these tests
pin what the staged path adds: which memory layouts choose it, bit-identical
results, in-place and empty tensors, which tensors are copied back, and
timestamps that time the dispatch without the copies.
"""

from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import pytest
from corpus import CASES, Run, harness
from test_vulkan_device import DOUBLE, double
from vulkan_shaders import HEADER, abi_for, compile_glsl, open_device, t

from iron.codegen.abi import pack_params
from iron.core import dtypes as D
from iron.runtime.vulkan import VulkanDevice
from iron.runtime.vulkan.memory import (DEVICE_LOCAL, HOST_CACHED, HOST_COHERENT, HOST_VISIBLE, MemoryType,
                                        describe_types, device_types, mapped_types, needs_staging, staging_types)

GiB, MiB = 1 << 30, 1 << 20
VIS = HOST_VISIBLE | HOST_COHERENT

#: Memory layouts as drivers report them: (flags, heap index, heap size) per memory type.
LAYOUTS = {
    # lavapipe: one type, everything at once.
    "lavapipe": [(DEVICE_LOCAL | VIS | HOST_CACHED, 0, 2 * GiB)],
    # Unified memory (an integrated GPU): the only heap is device-local and mappable.
    "integrated": [(DEVICE_LOCAL, 0, 8 * GiB), (DEVICE_LOCAL | VIS, 0, 8 * GiB),
                   (DEVICE_LOCAL | VIS | HOST_CACHED, 0, 8 * GiB)],
    # A discrete NVIDIA GPU without resizable BAR: VRAM, system memory, and a 256 MiB BAR window heap.
    "discrete": [(DEVICE_LOCAL, 0, 141 * GiB), (VIS, 1, 64 * GiB), (VIS | HOST_CACHED, 1, 64 * GiB),
                 (DEVICE_LOCAL | VIS, 2, 256 * MiB)],
    # The same GPU with resizable BAR: the whole VRAM heap has a mappable type.
    "resizable_bar": [(DEVICE_LOCAL, 0, 141 * GiB), (VIS, 1, 64 * GiB), (VIS | HOST_CACHED, 1, 64 * GiB),
                      (DEVICE_LOCAL | VIS, 0, 141 * GiB)],
    # A discrete GPU with no mappable device memory at all.
    "discrete_no_bar": [(DEVICE_LOCAL, 0, 24 * GiB), (VIS | HOST_CACHED, 1, 32 * GiB)],
}


def layout(name: str) -> list[MemoryType]:
    return [MemoryType(i, flags, heap, size) for i, (flags, heap, size) in enumerate(LAYOUTS[name])]


@pytest.mark.parametrize(("name", "staged"), [("lavapipe", False), ("integrated", False), ("discrete", True),
                                              ("resizable_bar", False), ("discrete_no_bar", True)])
def test_auto_stages_exactly_where_the_main_device_heap_is_not_mappable(name, staged):
    types = layout(name)
    assert needs_staging(types, "auto") is staged
    assert needs_staging(types, "always") and not needs_staging(types, "never")


def test_discrete_memory_choices_put_storage_in_vram_and_staging_in_cached_system_memory():
    types = layout("discrete")
    assert device_types(types)[0] == 0  # plain VRAM before the small BAR window
    assert staging_types(types)[0] == 2  # host-cached system memory: the host reads results back
    assert mapped_types(types)[0] == 3  # the mapped path would at least try device-local memory first
    assert set(device_types(types)) == {0, 3}  # never system memory for storage buffers
    assert describe_types(types)[3] == "3: device_local+host_visible+host_coherent (heap 2, 0.2 GiB)"


# ------------------------------------------------------------ staged vs mapped on the same launches
@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[VulkanDevice, VulkanDevice]]:
    mapped, staged = open_device(staging="never"), open_device(staging="always")
    yield mapped, staged
    mapped.close()
    staged.close()
    assert mapped.validation_messages == [] and staged.validation_messages == []


def _deterministic(ir) -> bool:
    """Whether the kernel's result cannot depend on thread order (no atomics)."""
    return not any(op.opcode.startswith("atomic") for op in ir.walk())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus_kernels_give_identical_bits_both_ways(pair, case, seed):
    run = Run(min(case.sizes), case.bindings[0], pair[0].info["subgroup_size"] if case.subgroup else 32)
    pristine = harness.make_inputs(case, run, seed.value)
    results = []
    for dev in pair:
        args = harness.fresh_args(case, pristine)
        ir = harness.optimized_ir(harness.frontend_ir(case, run, args), "spirv")
        grid, group = case.launch(run)
        dev.launch(ir, harness.ir_args(ir, case, args), grid, group)
        problems = harness.verdict(case, run, pristine, args)
        assert not problems, f"{'staged' if dev.staged else 'mapped'}: " + harness.describe(case, run, seed)
        results.append(args)
    if _deterministic(ir):
        for a, b in zip(*results):
            if isinstance(a, np.ndarray):
                assert a.tobytes() == b.tobytes(), harness.describe(case, run, seed)


def test_in_place_launch_copies_one_buffer_in_and_back(pair):
    for dev in pair:
        x = np.arange(1000, dtype=np.float32)
        double(dev, x, x)
        assert np.array_equal(x, 2 * np.arange(1000, dtype=np.float32))


def test_staged_placement_copies_every_tensor_in_and_only_written_ones_out(pair):
    placer = pair[1]._buffers
    x, y, z = np.ones(100, np.float32), np.ones(300, np.float32), np.zeros(0, np.float32)
    placed = placer.place([x, y, z, x], [False, True, True, False])
    try:
        assert placed.bound[0] is placed.bound[3]  # the same array twice: one buffer
        assert placed.bound[2] not in placed.bound[:2]  # the empty tensor binds its own dummy
        assert [(c.dst, c.size) for c in placed.copies_in] == [(placed.bound[0], 400), (placed.bound[1], 1200)]
        assert [(c.src, c.size) for c in placed.copies_out] == [(placed.bound[1], 1200)]
        assert [a is y for _, a in placed.downloads] == [True]
        assert all(b.view is None for b in placed.bound)  # device-local: never mapped
    finally:
        placer.release(placed)


def test_read_only_tensors_are_not_copied_back_even_if_the_shader_writes_them(pair):
    shader = DOUBLE.replace("readonly buffer X", "buffer X").replace("y[i] = 2.0 * x[i];",
                                                                      "y[i] = 2.0 * x[i]; x[i] = -1.0;")
    abi = abi_for("double", [("x", t(D.f32)), ("y", t(D.f32))], access={"x": "read", "y": "write"})
    for dev in pair:
        x = np.arange(64, dtype=np.float32)
        y = np.zeros(64, np.float32)
        dev.run_spirv(compile_glsl(shader), abi, [x, y], pack_params(abi, {}, (64,), {}), (64,), (64,))
        assert np.array_equal(x, np.arange(64, dtype=np.float32)) and np.array_equal(y, 2 * x)


def test_a_written_tensor_keeps_the_callers_values_where_the_kernel_does_not_write(pair):
    shader = HEADER + """
layout(set = 0, binding = 0) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.grid_x || i % 3u != 0u) return;
    y[i] = -float(i);
}
"""
    abi = abi_for("every_third", [("y", t(D.f32))], access={"y": "write"})
    for dev in pair:
        y = np.arange(1000, dtype=np.float32) + 0.5
        dev.run_spirv(compile_glsl(shader), abi, [y], pack_params(abi, {}, (1000,), {}), (1000,), (64,))
        i = np.arange(1000)
        assert np.array_equal(y, np.where(i % 3 == 0, -i, i + 0.5).astype(np.float32))


def test_empty_tensors_work_on_both_paths(pair):
    """An empty written tensor next to a full one: nothing to copy for it, and the full one still arrives."""
    shader = DOUBLE.replace("y[i] = 2.0 * x[i];", "x[i] += 1.0;")
    shader = shader.replace("readonly buffer X", "buffer X")
    abi = abi_for("bump", [("x", t(D.f32)), ("y", t(D.f32))], access={"x": "readwrite", "y": "write"})
    for dev in pair:
        x, y = np.arange(10, dtype=np.float32), np.zeros(0, np.float32)
        dev.run_spirv(compile_glsl(shader), abi, [x, y], pack_params(abi, {}, (10,), {}), (10,), (64,))
        assert y.size == 0 and np.array_equal(x, np.arange(10, dtype=np.float32) + 1)


def test_timestamps_time_the_dispatch_not_the_copies(pair):
    """One thread over a 64 MiB tensor: copying it in and out dwarfs the dispatch, which is all the stamps see.
    The best of three launches: a loaded machine (the suite's other workers) can stall lavapipe's dispatch itself
    for milliseconds, while stamps that took the copies in would hold most of every launch's wall time."""
    staged = pair[1]
    n = 16 * MiB
    x = np.ones(n, np.float32)
    y = np.zeros(n, np.float32)
    abi = abi_for("double", [("x", t(D.f32)), ("y", t(D.f32))], access={"x": "read", "y": "readwrite"})
    spirv = compile_glsl(DOUBLE)
    params = pack_params(abi, {}, (1,), {})
    staged.run_spirv(spirv, abi, [x, y], params, (1,), (1,))  # warm: pipeline and buffers exist
    shares = []
    for _ in range(3):
        start = time.perf_counter()
        ms = staged.run_spirv(spirv, abi, [x, y], params, (1,), (1,), timing=True)
        wall_ms = (time.perf_counter() - start) * 1e3
        assert ms > 0
        shares.append(ms / wall_ms)
    assert y[0] == 2 and y[1] == 0
    assert min(shares) < 0.1, f"the dispatch took {min(shares):.0%} or more of each launch: the copies were timed"


def test_the_staging_option_and_argument_are_checked():
    with pytest.raises(ValueError, match="staging must be auto, always or never"):
        VulkanDevice(staging="sometimes", validation=True)
