"""The disk caches: the VkPipelineCache per device and driver, and compiled SPIR-V per source and compiler.

A second device or process finds what the first saved; a corrupt, truncated
or foreign file is ignored (with the reason) and replaced, never fed to the
driver and never a crash.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_vulkan_device import double
from vulkan_shaders import missing, open_device

from iron import In, Tensor, config, f32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.toolchains import spirv as spirv_toolchain
from iron.lang import program_id
from iron.codegen import diskcache
from iron.codegen.cache import ArtifactCache
from iron.codegen.compiler import CompileOptions, compile
from iron.runtime.vulkan.pipeline_store import HEADER, KIND, cache_file, cache_key, header_problem


@kernel
def axpy(x: In[f32], y: Tensor[f32], a: f32):
    i = program_id(0)
    y[i] = a * x[i] + y[i]


def needs_compiler() -> None:
    if not spirv_toolchain.available():
        missing(f"no GLSL compiler here ({spirv_toolchain.unavailable_reason()}): {spirv_toolchain.INSTALL}")


# ------------------------------------------------------------ the envelope
def test_envelopes_round_trip_and_reject_damage(tmp_path):
    path = tmp_path / "a" / "blob.bin"
    assert diskcache.read(path, b"TEST") == (None, "no file yet")
    assert diskcache.write(path, b"TEST", b"payload" * 100) is None
    assert diskcache.read(path, b"TEST") == (b"payload" * 100, "ok")
    assert list(path.parent.iterdir()) == [path], "the temporary file was left behind"
    assert diskcache.read(path, b"OTHR")[1].startswith("holds b'TEST' data")
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    assert diskcache.read(path, b"TEST") == (None, "checksum mismatch (corrupt or truncated)")
    path.write_bytes(bytes(data[:20]))
    assert diskcache.read(path, b"TEST")[0] is None
    path.write_bytes(b"")
    assert diskcache.read(path, b"TEST")[0] is None


def test_a_write_that_cannot_happen_is_reported_not_raised(tmp_path):
    (tmp_path / "file").write_text("x")
    why = diskcache.write(tmp_path / "file" / "below" / "blob.bin", b"TEST", b"data")
    assert why is not None and "cannot write" in why


# ------------------------------------------------------------ the pipeline cache
def _header(info, version=1, vendor=None, device=None, uuid=None, size=32) -> bytes:
    return HEADER.pack(size, version, info.vendor_id if vendor is None else vendor,
                       info.device_id if device is None else device,
                       bytes.fromhex(info.pipeline_cache_uuid if uuid is None else uuid))


def test_pipeline_cache_headers_are_checked_field_by_field(device):
    info = device._info
    assert header_problem(_header(info) + b"driver data", info) is None
    assert "shorter than" in header_problem(_header(info)[:31], info)
    assert "header version 2" in header_problem(_header(info, version=2), info)
    assert "header size 64" in header_problem(_header(info, size=64), info)
    foreign = _foreign_vendor(info)
    assert f"written for vendor {foreign:#06x}" in header_problem(_header(info, vendor=foreign), info)
    other_uuid = "ff" * 16 if info.pipeline_cache_uuid != "ff" * 16 else "00" * 16
    assert "another driver build" in header_problem(_header(info, uuid=other_uuid), info)
    other = dataclasses.replace(info, driver_version=info.driver_version + 1)
    assert cache_file(Path("/c"), other) != cache_file(Path("/c"), info)  # a driver update starts afresh


def _foreign_vendor(info) -> int:
    """A vendor ID that is not this device's: AMD's on any other device, else NVIDIA's."""
    return 0x1002 if info.vendor_id != 0x1002 else 0x10DE


def _device_with_cache(directory: Path):
    return open_device(cache_dir=directory)


def test_a_second_device_loads_the_pipeline_cache_the_first_saved(tmp_path):
    first = _device_with_cache(tmp_path)
    x = np.arange(256, dtype=np.float32)
    y = np.zeros_like(x)
    double(first, x, y)
    path = Path(first.cache_stats["pipeline_cache_file"])
    assert "no file yet" in first.cache_stats["pipeline_cache"]
    first.close()
    assert path.is_file() and path.parent == tmp_path / "vulkan"
    assert "saved" in first.cache_stats["pipeline_cache"]
    second = _device_with_cache(tmp_path)
    try:
        assert second.cache_stats["pipeline_cache"].startswith("loaded ")
        double(second, x, y)
        assert np.array_equal(y, 2 * x)
        assert second.cache_stats["pipelines_created"] == 1
        assert 0 <= second.cache_stats["pipeline_cache_hits"] <= 1  # lavapipe keeps no pipelines in it
    finally:
        second.close()
    assert first.validation_messages == [] and second.validation_messages == []


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "garbage"])
def test_a_bad_pipeline_cache_file_is_ignored_and_replaced(tmp_path, damage):
    first = _device_with_cache(tmp_path)
    info = first._info
    first.close()
    path = Path(first.cache_stats["pipeline_cache_file"])
    good = path.read_bytes()
    if damage == "flip":
        path.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    elif damage == "truncate":
        path.write_bytes(good[:-10])
    elif damage == "foreign":  # a sound envelope around another GPU's data
        path.write_bytes(diskcache.wrap(KIND, _header(info, vendor=_foreign_vendor(info), device=0x2335),
                                        cache_key(info)))
    else:
        path.write_bytes(b"\0" * 4096)
    dev = _device_with_cache(tmp_path)
    status = dev.cache_stats["pipeline_cache"]
    reason = {"flip": "checksum mismatch", "truncate": "checksum mismatch",
              "foreign": f"written for vendor {_foreign_vendor(info):#06x}",
              "garbage": "not an Iron cache file"}[damage]
    assert status.startswith("ignored") and reason in status, status
    x = np.ones(64, np.float32)
    double(dev, x, np.zeros_like(x))
    dev.close()
    assert dev.validation_messages == []
    assert diskcache.read(path, KIND, cache_key(info))[1] == "ok"  # replaced by this device's own cache
    assert header_problem(diskcache.read(path, KIND, cache_key(info))[0], info) is None


def test_cache_dir_off_keeps_no_files():
    dev = open_device(cache_dir="off")
    dev.close()
    assert dev.cache_stats["pipeline_cache_file"] is None and dev.cache_stats["pipeline_cache"].startswith("off")


# ------------------------------------------------------------ compiled SPIR-V
class SpirvCompiler:
    """What a Vulkan device does: the compile driver with its profile and its own cache (a fresh memory)."""

    def __init__(self, profile, directory):
        self.options = CompileOptions(profile=profile, binary="spirv", optimised=True)
        self.cache = ArtifactCache(directory)

    def compile(self, ir):
        return compile(ir, "spirv", self.options, cache=self.cache)

    def __getattr__(self, name):
        return getattr(self.cache, name)


def _ir():
    return run_pipeline(axpy.ir(), PassContext.for_target("spirv"))


def test_a_second_compiler_takes_the_spirv_from_disk_without_compiling(device, tmp_path, monkeypatch):
    needs_compiler()
    first = SpirvCompiler(device.profile, tmp_path)
    compiled = first.compile(_ir())
    assert (first.compiles, first.disk_hits) == (1, 0) and "never compiled" in first.last_miss
    assert len(list((tmp_path / "spirv").glob("*.spv"))) == 1

    def refuse(*args, **kwargs):
        raise AssertionError("the GLSL compiler ran although the disk cache holds the module")

    monkeypatch.setattr(spirv_toolchain, "compile_glsl", refuse)
    second = SpirvCompiler(device.profile, tmp_path)
    again = second.compile(_ir())
    assert (second.compiles, second.disk_hits) == (0, 1)
    assert again.binary == compiled.binary and again.source == compiled.source


def test_the_spirv_key_includes_the_compilers_identity(device, tmp_path, monkeypatch):
    needs_compiler()
    SpirvCompiler(device.profile, tmp_path).compile(_ir())
    real = spirv_toolchain.version()
    monkeypatch.setattr(spirv_toolchain, "version", lambda: real + " (an upgrade)")
    upgraded = SpirvCompiler(device.profile, tmp_path)
    upgraded.compile(_ir())
    assert (upgraded.compiles, upgraded.disk_hits) == (1, 0)
    assert len(list((tmp_path / "spirv").glob("*.spv"))) == 2


@pytest.mark.parametrize("damage", [b"", b"IRONBLOBSPV1" + b"\0" * 40, "flip", "not-spirv"])
def test_a_corrupt_spirv_file_is_recompiled_and_replaced(device, tmp_path, damage):
    needs_compiler()
    good = SpirvCompiler(device.profile, tmp_path).compile(_ir())
    (path,) = (tmp_path / "spirv").glob("*.spv")
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[100] ^= 0x40
        damage = bytes(data)
    elif damage == "not-spirv":  # a sound envelope around something else
        damage = diskcache.wrap(b"SPV1", b"\x01\x02\x03\x04" * 16)
    path.write_bytes(damage)
    again = SpirvCompiler(device.profile, tmp_path)
    assert again.compile(_ir()).binary == good.binary
    assert (again.compiles, again.disk_hits) == (1, 0) and again.last_miss
    third = SpirvCompiler(device.profile, tmp_path)
    third.compile(_ir())
    assert third.disk_hits == 1, "the bad file was not replaced"


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from iron import In, Tensor, f32, kernel
    from iron.codegen.pipeline import PassContext, run_pipeline
    from iron.lang import program_id
    from iron.runtime.vulkan import VulkanDevice

    @kernel
    def axpy(x: In[f32], y: Tensor[f32], a: f32):
        i = program_id(0)
        y[i] = a * x[i] + y[i]

    with VulkanDevice(validation=True, cache_dir=sys.argv[1]) as dev:
        x = np.arange(512, dtype=np.float32)
        y = np.ones(512, np.float32)
        dev.launch(run_pipeline(axpy.ir(), PassContext.for_target("spirv")), [x, y, 2.0], (512,), (128,))
        assert np.array_equal(y, 2 * x + 1)
        stats = dev.cache_stats
    assert dev.validation_messages == [], dev.validation_messages
    print(json.dumps(stats))
""")


def test_a_second_process_skips_the_compiler_and_loads_the_pipeline_cache(device, tmp_path):
    needs_compiler()
    script = tmp_path / "child.py"
    script.write_text(_CHILD)

    def child() -> dict:
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / "cache")], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first, second = child(), child()
    assert (first["spirv_compiles"], first["spirv_disk_hits"]) == (1, 0)
    assert (second["spirv_compiles"], second["spirv_disk_hits"]) == (0, 1)
    assert "no file yet" in first["pipeline_cache"] and second["pipeline_cache"].startswith("loaded")


# ------------------------------------------------------------ the options
def test_cache_dir_option_values(tmp_path, monkeypatch):
    monkeypatch.delenv("IRON_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    config.reload()
    assert config.cache_dir() == tmp_path / "xdg" / "iron"
    config.set_option("cache_dir", "off")
    assert config.cache_dir() is None
    config.set_option("cache_dir", str(tmp_path / "mine"))
    assert config.cache_dir() == tmp_path / "mine"
    config.set_option("cache_dir", "auto")
    assert config.cache_dir() == tmp_path / "xdg" / "iron"


def test_vulkan_staging_option_values(monkeypatch):
    monkeypatch.setenv("IRON_VULKAN_STAGING", "Always")
    config.reload()
    assert config.get("vulkan_staging") == "always"
    monkeypatch.setenv("IRON_VULKAN_STAGING", "sometimes")
    config.reload()
    with pytest.raises(config.ConfigError, match="IRON_VULKAN_STAGING"):
        config.get("vulkan_staging")
