"""Stall reasons from Nsight Compute's SASS source page (``ncu --page source --csv --print-source sass``): their
shares over the whole kernel, then the instructions with the most samples and their top reasons.  Run:
``python3 scripts/device/ncu_stalls.py DIR/source.csv [--top N]`` (ncu_profile.sh runs it after each profile)."""

from __future__ import annotations

import argparse
import collections
import csv


def summarise(path: str, top: int) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        return [f"{path}: {e.strerror} (did the profile run?)"]
    header = next((r for r in rows if "Address" in r and "Source" in r), None)
    if header is None:
        return [f"{path}: no SASS source table (did the profile run?)"]
    at = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    samples = at.get("Warp Stall Sampling (All Samples)")
    total: collections.Counter = collections.Counter()
    lines = []
    for r in rows[rows.index(header) + 1:]:
        if len(r) != len(header) or samples is None or not r[samples].strip().isdigit():
            continue
        counts = {h: int(r[at[h]]) for h in reasons if r[at[h]].strip().isdigit()}
        total.update(counts)
        lines.append((int(r[samples]), r[at["Source"]].strip(), counts))
    whole = sum(total.values()) or 1
    out = ["stalls: " + ", ".join(f"{k[6:]} {100 * v / whole:.1f}%" for k, v in total.most_common(8))]
    for n, source, counts in sorted(lines, key=lambda x: -x[0])[:top]:
        worst = ", ".join(f"{k[6:]} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:3] if v)
        out.append(f"{100 * n / whole:5.1f}%  {source[:72]:72s}  {worst}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source_csv")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    print("\n".join(summarise(args.source_csv, args.top)))


if __name__ == "__main__":
    main()
