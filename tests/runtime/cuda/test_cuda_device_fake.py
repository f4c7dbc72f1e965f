"""The cuda device's host side against a fake driver: copies, aliasing, pools, streams, fast path, graphs.

A fake kernel runs the IR on the interpreter over the fake device memory, reading scalars and the grid
from the parameter block the device packed, so these tests check the bytes the GPU would get.
"""

from __future__ import annotations

import numpy as np
import pytest
from cudakernels import add, axpy, half_scale, ir, reverse_far_apart, reverse_in_groups, scale_into, tile_rows
from fakecuda import CUresult, FakeDriver, interpreted, pointer

from iron import In, T, Tensor, config, f16, f32, kernel
from iron.lang import program_id
from iron.core.errors import LaunchError
from iron.runtime.cuda import CudaDevice, CudaError


def setup(device, fake, k, counts, **overrides):
    kir = ir(k, **overrides)
    fake.kernels[kir.name] = interpreted(kir, counts)
    return kir


def test_numpy_arguments_are_copied_in_and_written_ones_back(device, fake):
    kir = setup(device, fake, axpy, {"x": 100, "y": 100})
    x = np.arange(100, dtype=np.float32)
    y = np.full(100, 7, np.float32)
    x_before = x.copy()
    device.launch(kir, [x, y, 2.0, 90], (100,), (32,))
    np.testing.assert_array_equal(y[:90], 2 * x[:90] + 7)
    np.testing.assert_array_equal(y[90:], 7), "elements the kernel left alone keep their values"
    np.testing.assert_array_equal(x, x_before)
    (launch,) = fake.launches
    assert launch.blocks == (4, 1, 1) and launch.threads == (32, 1, 1)
    assert launch.stream == device._order.own_handle
    assert fake.calls.count("cuMemcpyDtoHAsync") == 1, "only the written array comes back"


def test_in_place_launch_uses_one_device_buffer(device, fake):
    kir = setup(device, fake, add, {"x": 64, "y": 64, "out": 64})
    x = np.arange(64, dtype=np.float32)
    device.launch(kir, [x, x, x], (64,), (64,))
    np.testing.assert_array_equal(x, 2 * np.arange(64, dtype=np.float32))
    launch = fake.launches[0]
    assert pointer(launch, 0) == pointer(launch, 1) == pointer(launch, 2)
    with pytest.raises(LaunchError, match="overlap without being the same buffer"):
        device.launch(kir, [x[1:], x[:-1].copy(), x[:-1]], (63,), (64,))
    # The written parameter first, then the same array read: still copied back.
    first = setup(device, fake, scale_into, {"out": 64, "x": 64})
    z = np.arange(64, dtype=np.float32)
    device.launch(first, [z, z], (64,), (64,))
    np.testing.assert_array_equal(z, 2 * np.arange(64, dtype=np.float32))


def test_pools_reuse_blocks_across_launches(device, fake):
    kir = setup(device, fake, add, {"x": 1000, "y": 1000, "out": 1000})
    a, b, out = (np.ones(1000, np.float32) for _ in range(3))
    for _ in range(5):
        device.launch(kir, [a, b, out], (1000,), (128,))
    stats = device.cache_stats
    assert stats["device_pool"]["allocations"] == 3 and stats["device_pool"]["reuses"] == 12
    assert stats["pinned_pool"]["allocations"] == 3 and stats["device_pool"]["busy_bytes"] == 0
    np.testing.assert_array_equal(out, 2)


def test_scalars_and_sizes_reach_the_parameter_block(device, fake):
    kir = setup(device, fake, half_scale, {"x": 40})
    x = np.linspace(-2, 2, 40).astype(np.float16)
    want = (x * np.float16(0.3) + np.float16(5)).astype(np.float16)
    device.launch(kir, [x, 0.3, 5], (48,), (16,))
    np.testing.assert_array_equal(x, want)


def test_timing_and_errors(device, fake):
    kir = setup(device, fake, add, {"x": 8, "y": 8, "out": 8})
    a = np.ones(8, np.float32)
    assert device.launch_timed(kir, [a, a.copy(), a.copy()], (8,), (8,)) == fake.elapsed_ms
    with pytest.raises(LaunchError, match="group extent 1025 on axis 0 is over the limit of 1024"):
        device.launch(kir, [a, a.copy(), a.copy()], (8,), (1025,))
    fake.fail_launch = CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(CudaError, match="CUDA_ERROR_ILLEGAL_ADDRESS.*start a new process") as e:
        device.launch(kir, [a, a.copy(), a.copy()], (8,), (8,))
    assert e.value.code == 700
    assert device.cache_stats["device_pool"]["busy_bytes"] == 0, "blocks return to the pool after a failure"


def test_a_timed_launch_is_led_by_a_spin_so_host_latency_does_not_count(device, fake):
    """The start event goes in after a one-thread spin kernel of LEAD_NS on the same stream: on an idle GPU
    the event would otherwise fire while the host is still issuing the timed launch."""
    from iron.runtime.cuda.streams import LEAD_NS

    kir = setup(device, fake, add, {"x": 8, "y": 8, "out": 8})
    a = np.ones(8, np.float32)
    device.launch(kir, [a, a.copy(), a.copy()], (8,), (8,))
    assert [x.entry for x in fake.launches] == ["add"], "an untimed launch has no lead"
    device.launch_timed(kir, [a, a.copy(), a.copy()], (8,), (8,))
    spin, timed = fake.launches[-2:]
    assert (spin.entry, timed.entry) == ("iron_lead_spin", "add")
    assert spin.stream == timed.stream and spin.blocks == spin.threads == (1, 1, 1)
    assert int.from_bytes(spin.params[0], "little") == LEAD_NS
    at = len(fake.calls) - 1 - fake.calls[::-1].index("cuLaunchKernel")  # the timed kernel's launch
    before = fake.calls[:at]
    last_spin = len(before) - 1 - before[::-1].index("cuLaunchKernel")
    assert any(c.startswith("cuEventRecord") for c in before[last_spin:]), "start recorded after the spin"


def test_a_driver_that_cannot_load_the_lead_still_times(device, fake):
    kir = setup(device, fake, add, {"x": 8, "y": 8, "out": 8})
    real = fake.cuModuleLoadData
    fake.cuModuleLoadData = lambda image: (CUresult.CUDA_ERROR_INVALID_VALUE, None) if b"iron_lead_spin" in image \
        else real(image)
    a = np.ones(8, np.float32)
    assert device.launch_timed(kir, [a, a.copy(), a.copy()], (8,), (8,)) == fake.elapsed_ms
    assert [x.entry for x in fake.launches] == ["add"]


def test_whole_group_kernels_refuse_partial_groups(device, fake):
    kir = setup(device, fake, reverse_in_groups, {"x": 128})
    x = np.arange(128, dtype=np.float32)
    device.launch(kir, [x], (128,), (64,))
    np.testing.assert_array_equal(x, np.concatenate([np.arange(63, -1, -1), np.arange(127, 63, -1)]))
    with pytest.raises(LaunchError, match="not a multiple of the group"):
        device.launch(kir, [x], (100,), (64,))


def test_shared_memory_past_48_kib_is_opted_in_and_launched_dynamic(device, fake):
    kir = setup(device, fake, reverse_far_apart, {"x": 128})
    x = np.arange(128, dtype=np.float32)
    device.launch(kir, [x], (128,), (64,))
    np.testing.assert_array_equal(x, np.concatenate([np.arange(63, -1, -1), np.arange(127, 63, -1)]))
    assert fake.function_attributes[("reverse_far_apart", 8)] == 65536  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert fake.launches[-1].shared == 65536
    arr = device.to_device(x)
    for _ in range(2):  # the general path, then the generated fast launcher
        device.launch(kir, [arr], (128,), (64,))
    assert device._plans[id(kir)].fast is not None and fake.launches[-1].shared == 65536
    report = device.kernel_report(kir)  # the occupancy the driver gives with the dynamic bytes (the fake: 2)
    assert report["shared_bytes"] == 65536 and report["groups_per_sm"] == 2
    np.testing.assert_array_equal(arr.numpy(), x)  # reversed twice
    small = setup(device, fake, reverse_in_groups, {"x": 64})
    device.launch(small, [np.zeros(64, np.float32)], (64,), (64,))
    assert fake.launches[-1].shared == 0 and ("reverse_in_groups", 8) not in fake.function_attributes


def test_a_gpu_with_less_shared_memory_refuses_the_kernel_by_name(nvrtc, tmp_path):
    fake = FakeDriver(shared_optin=60 * 1024)
    dev = CudaDevice(driver=fake, cache_dir=tmp_path)
    try:
        kir = setup(dev, fake, reverse_far_apart, {"x": 64})
        with pytest.raises(CudaError, match="'reverse_far_apart' needs 65536 bytes of shared memory per group; "
                                            "this GPU allows 61440"):
            dev.launch(kir, [np.zeros(64, np.float32)], (64,), (64,))
        assert not fake.launches
    finally:
        dev.close()


def test_device_arrays_take_the_fast_path(device, fake):
    kir = setup(device, fake, axpy, {"x": 50, "y": 50})
    x = device.to_device(np.arange(50, dtype=np.float32))
    y = device.to_device(np.ones(50, np.float32))
    device.launch(kir, [x, y, 3.0, 50], (50,), (32,))
    plan = device._plans[id(kir)]
    assert plan.fast is not None and plan.fast_kinds == ("iron", "iron", "scalar", "scalar")
    general_calls = fake.calls.count("cuCtxSetCurrent")
    for _ in range(3):
        device.launch(kir, [x, y, 1.0, 50], (50,), (32,))
    assert fake.calls.count("cuCtxSetCurrent") == general_calls, "relaunches skipped the general path"
    np.testing.assert_array_equal(y.numpy(), 3 * np.arange(50) + 1 + 3 * np.arange(50))
    # Anything unexpected falls back to the general path, which raises the usual errors.
    with pytest.raises(LaunchError, match="does not fit i32"):
        device.launch(kir, [x, y, 1.0, 2**40], (50,), (32,))
    with pytest.raises(LaunchError, match="expects f32 elements"):
        device.launch(kir, [device.empty(50, f16), y, 1.0, 50], (50,), (32,))
    add_ir = setup(device, fake, add, {"x": 4, "y": 4, "out": 4})
    device.launch(add_ir, [x, y, device.empty(4, f32)], (4,), (4,))
    assert device._plans[id(add_ir)].fast is not None
    alias = _offset(device, y)
    launched = len(fake.launches)
    with pytest.raises(LaunchError, match="'y' and 'out' overlap"):
        device.launch(add_ir, [x, y, alias], (4,), (4,))
    assert len(fake.launches) == launched, "refused before anything was launched"
    alias.ptr = 0  # not a block of the pool: nothing to free


def test_tile_copy_kernels_take_the_fast_path_and_encode_a_map_once_per_address(device, fake):
    kir = setup(device, fake, tile_rows, {"a": 40 * 64, "out": 16 * 64})
    host = (np.arange(40 * 64) % 251).astype(np.float16)
    a, b = device.to_device(host), device.to_device(host[::-1].copy())
    out = device.empty(16 * 64, f16)
    device.launch(kir, [a, out, 40, 8], (32,), (32,))  # the general path: encodes the map, makes the launcher
    plan = device._plans[id(kir)]
    assert plan.abi.maps and plan.fast is not None

    def map_of(launch):
        return int.from_bytes(launch.params[-1][-128:-120], "little")  # the block ends in the map: its encoding

    def relaunch(*args):
        general = fake.calls.count("cuCtxSetCurrent")
        device.launch(kir, list(args), (32,), (32,))
        assert fake.calls.count("cuCtxSetCurrent") == general, "the relaunch took the generated launcher"

    for r0 in (30, 8):  # the row is no extent of the map: the same bytes
        relaunch(a, out, 40, r0)
        want = np.zeros(16 * 64, np.float16)
        rows = host.reshape(40, 64)[r0:r0 + 16].ravel()
        want[:rows.size] = rows
        np.testing.assert_array_equal(out.numpy(), want)
    assert len(fake.encoded) == 1 and map_of(fake.launches[-1]) == 1
    relaunch(b, out, 40, 0)  # another address: encoded in the launcher
    relaunch(a, out, 39, 0)  # another extent
    relaunch(b, out, 40, 0)  # seen before
    assert [e[0] for e in fake.encoded] == [a.ptr, b.ptr, a.ptr] and [e[1] for e in fake.encoded] == \
        [(64, 40), (64, 40), (64, 39)]
    assert [map_of(x) for x in fake.launches[-3:]] == [2, 3, 2]
    np.testing.assert_array_equal(out.numpy(), host[::-1].reshape(40, 64)[:16].ravel())
    launched = len(fake.launches)
    from iron.runtime.cuda.array import CudaArray

    shifted = CudaArray(device, a.ptr + 4, (64,), f16, 128)  # a view 4 bytes in: TMA needs 16-byte addresses
    with pytest.raises(LaunchError, match="kernel 'tile_rows'.*16-byte aligned"):
        device.launch(kir, [shifted, out, 1, 0], (32,), (32,))
    assert len(fake.launches) == launched, "refused before anything was launched"
    shifted.ptr = 0  # not a block of the pool: nothing to free


def test_a_launch_into_a_stream_another_library_captures_adds_no_wait_on_outside_work(device, fake, torch):
    """torch.cuda.graph captures torch's stream: a wait there on an event of the device's own stream would
    reach outside the capture, which CUDA refuses; the captured stream's own order is the order."""
    kir = setup(device, fake, add, {"x": 16, "y": 16, "out": 16})
    mem = [device.empty(16, f32) for _ in range(3)]
    tensors = [torch.Tensor(m.ptr, 16, torch.float32) for m in mem]
    device.launch(kir, mem, (16,), (16,))  # the device's own stream is the last one used
    fake.outside_capture = 0x77
    device.launch(kir, tensors, (16,), (16,))
    assert fake.launches[-1].stream == 0x77
    assert not any(c.startswith(("cuEventRecord", "cuStreamWaitEvent")) for c in fake.calls[-3:])
    fake.outside_capture = None
    device.launch(kir, mem, (16,), (16,))  # after the capture the order holds again
    assert fake.calls[-3:-1] == ["cuEventRecord(119)", f"cuStreamWaitEvent({device._order.own_handle})"]


def _offset(device, arr):
    """A CudaArray aliasing ``arr`` shifted by one element (what a view would be)."""
    from iron.runtime.cuda.array import CudaArray

    return CudaArray(device, arr.ptr + 4, (4,), arr.dtype, 16)


def test_torch_tensors_launch_on_torch_stream_and_order_across_changes(device, fake, torch):
    kir = setup(device, fake, add, {"x": 16, "y": 16, "out": 16})
    mem = [device.empty(16, f32) for _ in range(3)]
    tensors = [torch.Tensor(m.ptr, 16, torch.float32) for m in mem]
    device.launch(kir, tensors, (16,), (16,))
    device.launch(kir, tensors, (16,), (16,))  # the generated fast path
    assert [launch.stream for launch in fake.launches] == [0x77, 0x77]
    assert device._plans[id(kir)].fast_kinds == ("torch", "torch", "torch")
    assert "cuStreamWaitEvent(119)" in fake.calls, "torch's stream waited for the device's own stream's work"
    device.launch(kir, mem, (16,), (16,))
    assert fake.launches[-1].stream == device._order.own_handle
    assert fake.calls[-3:-1] == ["cuEventRecord(119)", f"cuStreamWaitEvent({device._order.own_handle})"]
    device.follow_streams = False
    device.launch(kir, tensors, (16,), (16,))
    assert fake.launches[-1].stream == device._order.own_handle


def test_graph_capture_and_replay(device, fake):
    kir = setup(device, fake, axpy, {"x": 8, "y": 8})
    x, y = device.to_device(np.ones(8, np.float32)), device.to_device(np.zeros(8, np.float32))
    device.launch(kir, [x, y, 1.0, 8], (8,), (8,))
    launched = len(fake.launches)
    device.begin_capture()
    device.launch(kir, [x, y, 2.0, 8], (8,), (8,))
    device.launch(kir, [x, y, 3.0, 8], (8,), (8,))
    with pytest.raises(LaunchError, match="host memory, which a CUDA graph cannot capture"):
        device.launch(kir, [np.ones(8, np.float32), y, 1.0, 8], (8,), (8,))
    graph = device.end_capture()
    assert graph.launches == 2 and len(fake.launches) == launched, "captured, not run"
    device.graph_launch(graph)
    device.graph_launch(graph)
    np.testing.assert_array_equal(y.numpy(), 1 + 2 * (2 + 3))
    assert device.graph_launch(graph, timing=True) == fake.elapsed_ms
    with pytest.raises(LaunchError, match="without begin_capture"):
        device.end_capture()
    graph.close()
    with pytest.raises(LaunchError, match="closed"):
        device.graph_launch(graph)


def test_description_options_and_close(nvrtc, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_FMAD", "0")
    config.reload()
    dev = CudaDevice(driver=fake, cache_dir=tmp_path)
    assert dev.fmad is False and dev.cache_stats["options"] == ["--fmad=false"]
    info = dev.info
    assert (info["name"], info["arch"], info["multiprocessors"], info["driver_version"]) == \
        ("Fake H200", "sm_90", 132, "13.0")
    assert info["nvrtc"].startswith("nvrtc ") and info["builds"] == "cubin for sm_90" and info["fmad"] is False
    assert CudaDevice(driver=FakeDriver(), cache_dir=tmp_path, fmad=True).fmad is True
    dev.close()
    dev.close()
    with pytest.raises(LaunchError, match="was closed"):
        dev.launch(ir(add), [np.ones(4, np.float32)] * 3, (4,), (4,))
    assert "cuDevicePrimaryCtxRelease" in fake.calls and "cuStreamDestroy" in fake.calls


def test_a_newer_gpu_gets_the_nearest_profile(nvrtc, tmp_path):
    dev = CudaDevice(driver=FakeDriver(arch=(12, 0)), cache_dir=tmp_path)
    assert dev.arch == "sm_120" and dev.profile.arch == "sm_90" and "nearest" in dev.info["profile_note"]
    dev.close()


def test_pool_size_classes_reuse_and_out_of_memory_retry():
    from iron.runtime.cuda.pools import Pool, size_class

    assert [size_class(n) for n in (0, 1, 256, 257, 5000)] == [256, 256, 256, 512, 8192]
    freed = []

    def allocate(n):
        if sum(live_sizes.values()) + n > 4096:
            raise CudaError("out of memory", 2, "CUDA_ERROR_OUT_OF_MEMORY")
        address = 0x1000 * (len(live_sizes) + len(freed) + 1)
        live_sizes[address] = n
        return address

    def free(address):
        freed.append(address)
        del live_sizes[address]

    live_sizes: dict[int, int] = {}
    pool = Pool(allocate, free, "test")
    a, cap = pool.acquire(3000)
    assert cap == 4096 and pool.allocations == 1
    pool.release(a)
    assert pool.acquire(2500) == (a, 4096) and pool.reuses == 1, "same size class: the idle block"
    pool.release(a)
    _, cap = pool.acquire(1000)  # another class; memory is full of an idle block: freed, then retried
    assert cap == 1024 and freed == [a] and pool.idle_bytes == 0
    pool.close()
    assert live_sizes == {}


def test_kernel_report_for_the_bench_table(device, fake):
    kir = setup(device, fake, add, {"x": 512, "y": 512, "out": 512})
    a = np.ones(512, np.float32)
    device.launch(kir, [a, a.copy(), a.copy()], (512,), (128,))
    report = device.kernel_report(kir)
    assert report["registers"] > 0, "ptxas's report (or the CUBIN's register count), kept with the module"
    # NVRTC 13.0 sometimes prints no ptxas report; the registers then come from the CUBIN, spills unknown.
    assert report["spill_stores"] == 0 or (report["spill_stores"] is None and report["report_source"] == "cubin")
    assert report["group_threads"] == 128 and report["groups_per_sm"] == 4
    assert report["wgmma_serialized"] is None  # no wgmma here (gemm_wg's own check: tests/std/test_gemm_wg.py)
    assert report["setmaxnreg_ignored"] is False  # no warp roles here (gemm_ws's own check: tests/std/test_gemm_ws.py)
    assert report["occupancy"] == 4 * 128 / 2048
    assert device.kernel_report(kir, (256,))["occupancy"] == 0.5


def test_a_thread_without_the_context_falls_back_to_the_general_path(device, fake):
    import threading

    kir = setup(device, fake, add, {"x": 8, "y": 8, "out": 8})
    arrays = [device.to_device(np.full(8, v, np.float32)) for v in (1, 2, 0)]
    device.launch(kir, arrays, (8,), (8,))
    real = fake.cuLaunchKernel
    current = {"ok": False}

    def needs_context(*args):
        return real(*args) if current["ok"] else (CUresult.CUDA_ERROR_INVALID_CONTEXT,)

    def set_current(ctx):
        current["ok"] = True
        return (CUresult.CUDA_SUCCESS,)

    fake.cuLaunchKernel, fake.cuCtxSetCurrent = needs_context, set_current
    device._plans[id(kir)].fast_by_kinds.clear()
    device._plans[id(kir)].fast = None
    device.launch(kir, arrays, (8,), (8,))  # regenerates the fast launcher around the patched launch
    current["ok"] = False
    thread = threading.Thread(target=device.launch, args=(kir, arrays, (8,), (8,)))
    thread.start()
    thread.join()
    assert current["ok"], "the general path made the context current"
    assert len(fake.launches) == 3
    np.testing.assert_array_equal(arrays[2].numpy(), 3)


def test_prepare_builds_the_module_a_later_launch_finds_in_memory(device, fake):
    """What the test runner's build pool calls ahead of a launch: NVRTC once, no device work."""
    kir = setup(device, fake, add, {"x": 8, "y": 8, "out": 8})
    before = device.cache_stats
    launches = len(fake.launches)
    device.prepare(kir)
    built = device.cache_stats
    assert built["compiles"] + built["disk_hits"] == before["compiles"] + before["disk_hits"] + 1
    assert len(fake.launches) == launches and built["modules_loaded"] == before["modules_loaded"]
    a = np.ones(8, np.float32)
    device.launch(kir, [a, a.copy(), a.copy()], (8,), (8,))
    after = device.cache_stats
    assert after["compiles"] == built["compiles"] and after["memory_hits"] == built["memory_hits"] + 1


def test_a_repeated_launch_goes_straight_to_the_devices_launcher(served, fake, torch, launches):
    """k[grid](...) and k.variant(...).launch(...) again with arguments of the same kinds: the device's generated
    launcher checks them and launches, with no resolution in the jit; what it refuses takes the full path."""
    kir = setup(served, fake, add, {"x": 16, "y": 16, "out": 16})
    mem = [served.empty(16, f32) for _ in range(3)]
    mem[0].copy_from(np.arange(16, dtype=np.float32))
    mem[1].copy_from(np.ones(16, np.float32))
    tensors = [torch.Tensor(m.ptr, 16, torch.float32) for m in mem]
    launch = add[16, 16]
    for _ in range(3):
        launch(*tensors, backend="cuda")
    assert launches == ["add"] and len(fake.launches) == 3  # resolved once; the device's launcher after that
    np.testing.assert_array_equal(mem[2].numpy(), np.arange(16) + 1)
    with pytest.raises(LaunchError, match="f16"):  # refused by the launcher, then explained by the full path
        launch(tensors[0], torch.Tensor(mem[1].ptr, 16, torch.float16), tensors[2], backend="cuda")
    assert launches[-1] == "add" and len(fake.launches) == 3
    add.launch(*tensors, grid=16, group=16, backend="cuda")  # k.launch(...): its own last launch
    add.launch(*tensors, grid=16, group=16, backend="cuda")
    assert launches.count("add") == 3 and len(fake.launches) == 5
    v = add.variant()
    v.launch(*tensors, grid=16, group=16, backend="cuda")
    v.launch(*tensors, grid=16, group=16, backend="cuda")
    v.launch(*tensors, grid=(16,), group=16, backend="cuda")  # another request: resolved again
    assert launches.count("add") == 5 and len(fake.launches) == 8
    assert kir is not None


def test_an_option_change_or_another_device_takes_the_full_path_again(served, fake, torch, launches, monkeypatch):
    import iron.runtime as rt

    setup(served, fake, add, {"x": 16, "y": 16, "out": 16})
    mem = [served.empty(16, f32) for _ in range(3)]
    tensors = [torch.Tensor(m.ptr, 16, torch.float32) for m in mem]
    launch = add[16, 16]
    launch(*tensors, backend="cuda")
    launch(*tensors, backend="cuda")
    assert len(launches) == 1
    config.reload()  # a new options generation
    launch(*tensors, backend="cuda")
    assert len(launches) == 2
    launch(*tensors, backend="cuda")
    assert len(launches) == 2
    monkeypatch.setitem(rt._devices, "cuda", object())  # the name now served by another device object
    with pytest.raises(Exception):
        launch(*tensors, backend="cuda")
    assert len(launches) == 3


def test_a_kernel_whose_binding_follows_the_arguments_is_resolved_every_launch(served, fake, torch, launches):
    assert not generic_copy.binding_is_fixed({}) and generic_copy.binding_is_fixed({"T": f32})
    assert add.binding_is_fixed({})
    for _ in range(2):
        m = [served.empty(16, f32) for _ in range(2)]
        generic_copy[16, 16](*[torch.Tensor(a.ptr, 16, torch.float32) for a in m], backend="cuda")
    assert launches == ["generic_copy", "generic_copy"]


@kernel
def generic_copy(x: In[T], y: Tensor[T]):
    i = program_id(0)
    y[i] = x[i]


def test_a_launch_after_one_with_an_array_geometry_is_refused_as_before(served, fake, torch, launches):
    """A geometry numpy compares elementwise: the relaunch check says no match instead of raising numpy's
    ValueError, and the launch's own error is what the user sees."""
    setup(served, fake, add, {"x": 16, "y": 16, "out": 16})
    mem = [served.empty(16, f32) for _ in range(3)]
    tensors = [torch.Tensor(m.ptr, 16, torch.float32) for m in mem]
    add.launch(*tensors, grid=16, group=16, backend="cuda")
    add.launch(*tensors, grid=16, group=16, backend="cuda")
    with pytest.raises(LaunchError, match="grid must be a positive int"):
        add.launch(*tensors, grid=np.array([16, 1]), group=16, backend="cuda")
    assert len(fake.launches) == 2
