"""Which std calls' launches miss the device's generated launcher: per call, how many of 100 repeated calls'
launches took the general path (``CudaDevice.launch_timed``), and a short profile of the call.

For the GPU machine.  Run: ``PYTHONPATH=src python3 scripts/device/std_fast_path.py``.  Prints JSON.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats

import torch

from iron.runtime.cuda import CudaDevice
from iron.std import norms, reduce, softmax, elementwise


def main() -> None:
    bf = torch.bfloat16
    x1, w, r1 = torch.randn(1, 4096, device="cuda", dtype=bf), torch.randn(4096, device="cuda", dtype=bf), \
        torch.randn(1, 4096, device="cuda", dtype=bf)
    xs = torch.randn(32, 32000, device="cuda", dtype=bf)
    e = torch.randn(32, device="cuda", dtype=bf)
    eo = torch.empty_like(e)
    calls = {"sum 32x32000": lambda: reduce.sum(xs), "add_rmsnorm 1x4096": lambda: norms.add_rmsnorm(x1, r1, w),
             "rmsnorm 1x4096": lambda: norms.rmsnorm(x1, w), "softmax 32x32000": lambda: softmax.softmax(xs),
             "exp 32 out=": lambda: elementwise.exp(e, out=eo)}
    general = {"n": 0}
    real = CudaDevice.launch_timed

    def counting(self, *args, **kwargs):
        general["n"] += 1
        return real(self, *args, **kwargs)

    CudaDevice.launch_timed = counting
    out = {}
    for name, call in calls.items():
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        general["n"] = 0
        for _ in range(100):
            call()
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            call()
        torch.cuda.synchronize()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
        out[name] = {"general_path_launches_per_100_calls": general["n"], "profile": text.getvalue()[-3500:]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
