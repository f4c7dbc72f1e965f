"""Every SPIR-V cache file is bound to its whole key: a file under another entry's name is a miss, not a kernel.

Rotating two sound cache files between their names once made each kernel run
the other one; a forged file (a sound envelope around another module) was
used on every launch and never replaced.  Both must read as a miss, be
recompiled and be replaced.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from vulkan_shaders import missing, open_device

from iron import In, Tensor, i32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.toolchains import spirv as spirv_toolchain
from iron.lang import program_id
from iron.codegen import diskcache
from iron.codegen.cache import KIND


@kernel
def plus_one(x: In[i32], y: Tensor[i32]):
    i = program_id(0)
    y[i] = x[i] + 1


@kernel
def times_three(x: In[i32], y: Tensor[i32]):
    i = program_id(0)
    y[i] = x[i] * 3


X = np.arange(64, dtype=np.int32)
WANT = {"plus_one": X + 1, "times_three": X * 3}


def _run_both(cache: Path) -> dict:
    """Each kernel's result on a fresh device (so SPIR-V comes from disk, not memory), and its cache stats."""
    if not spirv_toolchain.available():
        missing(f"no GLSL compiler here ({spirv_toolchain.unavailable_reason()}): {spirv_toolchain.INSTALL}")
    dev = open_device(cache_dir=cache)
    try:
        got = {}
        for k in (plus_one, times_three):
            y = np.zeros_like(X)
            dev.launch(run_pipeline(k.ir(), PassContext.for_target("spirv")), [X, y], (X.size,), (64,))
            got[k.name] = y
        return {"results": got, **dev.cache_stats}
    finally:
        dev.close()


def _spirv_files(cache: Path) -> list[Path]:
    return sorted((cache / "spirv").glob("*.spv"))


def test_rotated_spirv_files_do_not_run_another_kernel(tmp_path):
    cache = tmp_path / "cache"
    first = _run_both(cache)
    assert first["spirv_compiles"] == 2
    a, b = _spirv_files(cache)
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)  # each sound file now sits under the other kernel's key
    b.write_bytes(data_a)
    second = _run_both(cache)
    for name, want in WANT.items():
        assert np.array_equal(second["results"][name], want), f"{name} ran another kernel's SPIR-V"
    assert second["spirv_disk_hits"] == 0 and second["spirv_compiles"] == 2
    assert "stored under another key" in second["spirv_last_miss"]
    third = _run_both(cache)  # the rotated files were replaced by the right ones
    assert (third["spirv_disk_hits"], third["spirv_compiles"]) == (2, 0)
    assert all(np.array_equal(third["results"][n], w) for n, w in WANT.items())


def test_a_forged_spirv_file_is_ignored_and_replaced(tmp_path):
    cache = tmp_path / "cache"
    _run_both(cache)
    a, b = _spirv_files(cache)
    other = diskcache.read(b, KIND, _stored_key(b))[0]
    a.write_bytes(diskcache.wrap(KIND, other))  # a sound envelope, valid SPIR-V, but no key (a forged file)
    second = _run_both(cache)
    assert all(np.array_equal(second["results"][n], w) for n, w in WANT.items())
    assert (second["spirv_disk_hits"], second["spirv_compiles"]) == (1, 1)
    third = _run_both(cache)
    assert (third["spirv_disk_hits"], third["spirv_compiles"]) == (2, 0), "the forged file was not replaced"


def _stored_key(path: Path) -> bytes:
    """The key stored in the sound cache file ``path`` (read back from its envelope)."""
    data = path.read_bytes()
    body = data[len(diskcache.MAGIC) + 4 + 32:]
    size = int.from_bytes(body[:4], "little")
    return body[4:4 + size]
