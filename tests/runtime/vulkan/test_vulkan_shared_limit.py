"""A launch whose shared arrays plus mma scratch exceed the device's shared memory is refused up front.

``prefill_attention(block=64, backend="vulkan")`` on lavapipe declared 31 KiB of arrays plus 24 KiB of
portable mma scratch (sized from the group, so the emitter never checked it) against 32 KiB: invalid
Vulkan, and lavapipe's LLVM spent over ten minutes compiling the pipeline (coroutine splitting around its
barriers) instead of refusing.  It runs in a subprocess here so that a regression times out, not hangs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from vulkan_shaders import missing

SCRIPT = textwrap.dedent("""
    import numpy as np
    from iron.core.errors import LaunchError
    from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable
    from iron.std.attention import prefill_attention
    try:
        dev = VulkanDevice()
    except VulkanUnavailable as e:
        print("SKIP", e)
        raise SystemExit(0)
    if "llvmpipe" not in dev.info["name"]:
        print("SKIP not lavapipe")
        raise SystemExit(0)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 70, 64)).astype(np.float16)
    k = rng.standard_normal((1, 1, 70, 64)).astype(np.float16)
    v = rng.standard_normal((1, 1, 70, 64)).astype(np.float16)
    try:
        prefill_attention(q, k, v, block=64, backend="vulkan")
    except LaunchError as e:
        print("REFUSED", e)
""")


def test_prefill_block_64_is_refused_quickly_on_lavapipe(tmp_path: Path):
    env = dict(os.environ, IRON_CACHE_DIR=str(tmp_path), PYTHONPATH=str(Path(__file__).parents[3] / "src"))
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("prefill_attention(block=64) on Vulkan did not finish in 240 s (the pipeline is being compiled)")
    if proc.stdout.startswith("SKIP"):
        missing(proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "REFUSED" in proc.stdout, proc.stdout
    assert "attention_prefill" in proc.stdout and "32768 bytes of shared memory" in proc.stdout
    assert "mma scratch" in proc.stdout
