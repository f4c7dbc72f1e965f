"""Which TMA tile stores the GPU takes: one store_tile per group at shifted coordinates, each configuration in a
fresh child process (a faulting store corrupts the CUDA context), printing one JSON line each.

For the GPU machine.  Iron's store_tile lets a box reach past any edge of the matrix (the hardware skips those
elements); this finds whether the H200 also takes boxes that start at negative rows or columns, and which
alignments it needs, so that the language's rule (the interpreter's check) matches the hardware.

Run: ``PYTHONPATH=src python3 scripts/device/tma_store_probe.py [backend]`` (default cuda).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys
import numpy as np
from iron import In, T, Tensor, f32, f16, kernel, variants
from iron.lang import barrier, group_id, shared, store_tile, store_tile_wait, thread_id

@kernel(variants(T=[f32, f16], LAYOUT=["rows", "sw128"], BC=[8, 32, 64], DR=[0, -3, 5], DC=[0, -8, 8, 16]))
def probe(a: In[T], out: Tensor[T], m: int, cols: int):
    s = shared(T, 16 * BC)
    t = thread_id(0)
    row, col = 16 * group_id(1) + DR, BC * group_id(0) + DC
    for e in range(t, 16 * BC, 32):
        r, c = e // BC, e % BC
        i, j = row + r, col + c
        inside = i >= 0 and i < m and j >= 0 and j < cols
        v = a[i * cols + j if inside else 0] if inside else T(-1.0)
        if LAYOUT == "sw128":
            chunk = 16 // T.itemsize
            s[r * (128 // T.itemsize) + (((c // chunk) ^ (r % 8)) * chunk) + c % chunk] = v
        else:
            s[r * BC + c] = v
    barrier()
    if t == 0:
        store_tile(s, 0, out, (m, cols), (row, col), (16, BC), layout=LAYOUT)
        store_tile_wait()

cfg = json.loads(sys.argv[1])
dt = {"f32": f32, "f16": f16}[cfg["T"]]
m, cols = 21, 40
np_t = np.float32 if cfg["T"] == "f32" else np.float16
a = np.arange(m * cols).astype(np_t)
out = np.zeros_like(a)
bc = cfg["BC"]
gx = -(-(cols + abs(cfg["DC"])) // bc) * 32
gy = -(-(m + abs(cfg["DR"])) // 16)
try:
    probe.variant(T=dt, LAYOUT=cfg["LAYOUT"], BC=bc, DR=cfg["DR"], DC=cfg["DC"]).launch(
        a, out, m, cols, grid=(gx, gy), group=(32, 1), backend="cuda")
    r0, c0 = max(cfg["DR"], 0), max(cfg["DC"], 0)  # boxes shifted forward leave the first rows / cols alone
    covered = np.array_equal(a.reshape(m, cols)[r0:, c0:], out.reshape(m, cols)[r0:, c0:])
    print(json.dumps({**cfg, "ok": True, "equal": bool(covered and not out.reshape(m, cols)[:r0, :c0].any())}))
except Exception as e:
    print(json.dumps({**cfg, "ok": False, "error": str(e)[:160]}))
"""


def main() -> None:
    configs = []  # the most telling first: a run's time limit may cut the list
    for dr, dc in ((0, 0), (-3, -8), (-3, 0), (0, -8), (5, 0), (0, 8), (0, 16)):
        for t, layout, bc in (("f32", "rows", 32), ("f32", "sw128", 32), ("f16", "rows", 8), ("f16", "sw128", 64)):
            configs.append({"T": t, "LAYOUT": layout, "BC": bc, "DR": dr, "DC": dc})
    backend = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    child = Path(tempfile.mkdtemp()) / "tma_store_child.py"  # Iron reads kernels' source: a file, not -c
    child.write_text(CHILD.replace('backend="cuda"', f'backend="{backend}"'))
    for cfg in configs:
        done = subprocess.run([sys.executable, str(child), json.dumps(cfg)], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "IRON_TMA_STORE": "1"})  # the TMA form, on trial
        lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
        print(lines[-1] if lines else json.dumps({**cfg, "ok": False, "error": done.stderr[-300:]}), flush=True)


if __name__ == "__main__":
    main()
