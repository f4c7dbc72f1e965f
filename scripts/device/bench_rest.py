"""Run ``python3 -m iron.runner bench`` without the rows that earlier streams already hold.

A device call has a time limit; a bench over every registered row takes longer.  This finishes the rows
an earlier call did not reach (or measures only what is new) by passing ``--skip name[case,dtype]`` for
each ``bench_row`` that is ``ok`` in the given stream files.

    python3 scripts/device/bench_rest.py done1.jsonl [done2.jsonl ...] -- --backend cuda --filter std/ > rows.jsonl
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def measured_ids(paths: list[str]) -> list[str]:
    """The item ids (``name[case,dtype]``) of the rows these streams hold and checked."""
    ids: list[str] = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            data = message.get("data") or {}
            if message.get("kind") == "bench_row" and data.get("ok"):
                ids.append(f"{data['bench']}[{data['shape']},{data['dtype'] or '-'}]")
    return sorted(set(ids))


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: bench_rest.py ROWS.jsonl ... -- RUNNER-ARGS", file=sys.stderr)
        return 2
    split = argv.index("--")
    skips = [arg for item in measured_ids(argv[:split]) for arg in ("--skip", item)]
    print(f"bench_rest: leaving out {len(skips) // 2} measured rows", file=sys.stderr)
    command = [sys.executable, "-m", "iron.runner", "bench", *argv[split + 1:], *skips]
    os.execv(sys.executable, command)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
