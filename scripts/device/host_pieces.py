"""Where a replayed std call's host time goes, piece by piece, on torch CUDA tensors: one JSON object.

For the GPU machine.  Each figure is the wall time per call of a back-to-back loop with one synchronize at
the end (median of ``--reps`` loops of ``--count``), for one piece of a std call's replay on a tiny input
(so the GPU never holds the host back): torch's allocation and stream query, the call signature (native and
Python), the plan's written-out replay, the launcher the device bound to it, the driver call alone, and the
whole call, beside torch's own call of the same op.  With ``--profile`` the whole calls are profiled too
(cProfile).  Run: ``PYTHONPATH=src python3 scripts/device/host_pieces.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from typing import Any, Callable

import torch

from iron import config
from iron.std import _plans, elementwise, softmax


def per_call_us(call: Callable[[], Any], count: int, reps: int) -> float:
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / count * 1e6)
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    x = torch.randn(32, device="cuda").to(torch.bfloat16)
    o, t = torch.empty_like(x), torch.empty_like(x)
    w = torch.randn(4, 64, device="cuda").to(torch.bfloat16)
    exp_call = lambda: elementwise.exp(x, out=o)  # noqa: E731
    softmax_call = lambda: softmax.softmax(w)  # noqa: E731
    exp_call(), softmax_call(), exp_call(), softmax_call()
    exp_plan = next(p for p in elementwise.exp.plans.values() if p is not None)
    soft_plan = next(p for p in softmax.softmax.plans.values() if p is not None)
    go = exp_plan.run.__globals__.get("GO0")
    generation = config.generation()
    native = _plans.signature_function(generation)
    values = [x, o, None]
    p0, p1 = x.data_ptr(), o.data_ptr()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    size, dtype, device = (4, 64), torch.bfloat16, w.device
    pieces: dict[str, Callable[[], Any]] = {
        "torch.empty(size, dtype=, device=)": lambda: torch.empty(size, dtype=dtype, device=device),
        "torch.empty_like(w)": lambda: torch.empty_like(w),
        "torch current raw stream": (lambda: raw(0)) if raw else (lambda: None),
        "x.data_ptr()": x.data_ptr,
        "signature, native (x, out, None)": lambda: native(values, generation),
        "signature, Python (x, out, None)": lambda: _plans.signature_py(values, generation),
        "exp plan.run (bound launch included)": lambda: exp_plan.run([x, o]),
        "exp bound launcher go(p0, p1)": (lambda: go(p0, p1)) if go else (lambda: None),
        "softmax plan.run (allocation and launch)": lambda: soft_plan.run([w]),
        "elementwise.exp(x, out=o), whole call": exp_call,
        "torch.exp(x, out=t)": lambda: torch.exp(x, out=t),
        "softmax.softmax(w), whole call": softmax_call,
        "torch.softmax(w, -1)": lambda: torch.softmax(w, -1),
    }
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "native_signature": native is not _plans.signature_py, "bound": go is not None,
                           "exp_plan_source": exp_plan.run.source, "us": {}}
    for name, call in pieces.items():
        out["us"][name] = per_call_us(call, args.count, args.reps)
    if args.profile:
        out["profiles"] = {}
        for name, call in (("exp", exp_call), ("softmax", softmax_call)):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(5000):
                call()
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
            out["profiles"][name] = text.getvalue().splitlines()[-20:]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
