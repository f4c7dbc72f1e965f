"""Iron's exp on the Vulkan device vs PyTorch's on CUDA, same GPU, same run: GB/s and the ratio.

For the GPU machine (the H200): an f32 exp over N elements reads and writes 8 N bytes, so it is
memory bound; the ceiling is the device's copy bandwidth, measured here too (torch clone).
Vulkan times the dispatch alone with timestamp queries, torch with CUDA events; each figure is
the median of ``--reps`` runs after warm-ups.  Both outputs are checked against numpy.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

from iron import In, Tensor, f32, kernel
from iron.lang import exp, program_id

from cuda_events import median_ms


@kernel
def iron_exp(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        out[i] = exp(a[i])


def _vulkan(staging: str, a: np.ndarray, reps: int) -> tuple[float, dict]:
    from iron.runtime.vulkan import VulkanDevice

    out = np.empty_like(a)
    with VulkanDevice(validation=False, staging=staging) as dev:
        kir = iron_exp.variant().compiled("spirv")
        times = [dev.launch_timed(kir, [a, out, a.size], (a.size,), (256,)) for _ in range(reps + 3)][3:]
        info = {"buffers": dev.info["buffers"], "device": dev.info["name"]}
    np.testing.assert_allclose(out, np.exp(a), rtol=2e-6)
    return statistics.median(times), info


def _torch(a: np.ndarray, reps: int) -> tuple[float, float]:
    import torch

    x = torch.from_numpy(a).cuda()
    y = torch.empty_like(x)

    def timed(fn) -> float:
        return median_ms(torch, fn, reps)

    exp_ms = timed(lambda: torch.exp(x, out=y))
    np.testing.assert_allclose(y.cpu().numpy(), np.exp(a), rtol=2e-6)
    copy_ms = timed(lambda: y.copy_(x))
    return exp_ms, copy_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    a = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    gb = 8 * args.n / 1e9
    result: dict = {"n": args.n, "bytes": 8 * args.n}
    torch_ms, copy_ms = _torch(a, args.reps)
    result["torch_exp"] = {"ms": torch_ms, "GB/s": gb / torch_ms * 1e3}
    result["torch_copy"] = {"ms": copy_ms, "GB/s": gb / copy_ms * 1e3}
    for staging in ("always", "never"):
        ms, info = _vulkan(staging, a, args.reps)
        result[f"vulkan_{staging}"] = {"ms": ms, "GB/s": gb / ms * 1e3, **info,
                                       "vs_torch": torch_ms / ms, "vs_copy": copy_ms / ms}
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
