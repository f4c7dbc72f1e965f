"""The bench table (and an `iron bench --json` document) from a runner's protocol stream, even a cut-off one.

    python -m iron.runner bench --backend cuda --filter std/ > rows.jsonl     # on the GPU machine
    python scripts/device/stream_table.py rows.jsonl [-v] [--save bench.json]  # here: every row that arrived

A device call that runs out of time still brings back every row the runner had written, where
`iron bench` would print nothing: its table comes only at the end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iron.cli import render
from iron.core import protocol
from iron.harness.measured import write_json_atomically


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stream")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("--save", metavar="FILE.json")
    args = p.parse_args()
    rows, device, backend = [], "?", "?"
    for line in Path(args.stream).read_text().splitlines():
        if not line.startswith("{"):
            continue
        try:
            msg = protocol.decode(line)
        except protocol.ProtocolError:
            continue
        if msg.kind == "hello":
            device, backend = msg.data.get("device", device), msg.data.get("backend", backend)
        elif msg.kind == "bench_row":
            rows.append(protocol.bench_row(msg.data))
        elif msg.kind == "error":
            print(f"error: {msg.data}", file=sys.stderr)
    sys.stdout.write(render.bench_table(rows, device, args.verbose))
    if args.save:
        write_json_atomically(Path(args.save), render.bench_document(rows, device, backend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
