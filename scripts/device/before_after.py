"""The std bench rows of two source trees in one run of the GPU machine: is a change free on the GPU?

    python3 scripts/device/before_after.py BASE_SRC NEW_SRC --filter std/elementwise/exp --filter std/gemv/rows ...

For each filter, the runner benches the rows of the base tree, then the new tree, then both again in the
other order (each in its own process, ``python -m iron.runner bench --backend cuda``), so drift in the
machine's clocks hits both sides alike.  Prints one JSON line per row: the kernel time of each tree (the
better of its two runs' medians), the reference's, and new/base; then a summary line.  ``--dtype``
(default bf16) and ``--rounds`` (default 2) as named.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict


def bench(src: str, filt: str, dtype: str, extra_path: str) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (extra_path, src) if p)}
    proc = subprocess.run([sys.executable, "-m", "iron.runner", "bench", "--backend", "cuda", "--filter", filt,
                           "--dtype", dtype], capture_output=True, text=True, env=env, timeout=540)
    rows = {}
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("kind") == "bench_row":
            d = msg["data"]
            rows[f"{d['bench']}[{d['shape']},{d['dtype']}]"] = d
    if proc.returncode != 0 and not rows:
        print(json.dumps({"filter": filt, "src": src, "error": proc.stderr[-800:]}), flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base")
    p.add_argument("new")
    p.add_argument("--filter", action="append", required=True)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--extra-path", default=os.environ.get("EXTRA_PYTHONPATH", ""))
    args = p.parse_args()
    started = time.time()
    ratios = []
    for filt in args.filter:
        seen: dict[str, dict[str, list]] = defaultdict(lambda: {"base": [], "new": [], "ref": [], "ok": []})
        for r in range(args.rounds):
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for side in order:
                for row_id, d in bench(getattr(args, side), filt, args.dtype, args.extra_path).items():
                    s = seen[row_id]
                    s[side].append(d.get("iron_us"))
                    s["ref"].append(d.get("ref_us"))
                    s["ok"].append(bool(d.get("ok")))
        for row_id, s in seen.items():
            base = min((t for t in s["base"] if t), default=None)
            new = min((t for t in s["new"] if t), default=None)
            ref = min((t for t in s["ref"] if t), default=None)
            ratio = new / base if base and new else None
            if ratio:
                ratios.append(ratio)
            print(json.dumps({"row": row_id, "base_us": base, "new_us": new, "ref_us": ref,
                              "new_over_base": round(ratio, 4) if ratio else None, "all_ok": all(s["ok"]),
                              "base_runs": s["base"], "new_runs": s["new"]}), flush=True)
    if ratios:
        ratios.sort()
        print(json.dumps({"rows": len(ratios), "median_new_over_base": ratios[len(ratios) // 2],
                          "min": ratios[0], "max": ratios[-1], "seconds": round(time.time() - started)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
