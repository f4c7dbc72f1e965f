"""Bench baselines (``iron snap``) and their comparison (``iron diff``).

A snapshot is one JSON file, versioned so that a later Iron never misreads it::

    {"format": "iron-snap", "version": 1, "device": "NVIDIA H200", "backend": "cuda",
     "created": "2025-06-01T12:00:00+00:00", "iron_version": "0.1.0", "rows": [BenchRow, ...]}

Rows are compared by (bench, shape, dtype, backend).  A row regresses when its median time grew by
more than the threshold, or when it passed in the baseline and fails now.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._version import __version__
from ..core import protocol
from ..core.errors import IronError
from ..core.protocol import BenchRow, ProfileInfo
from ..harness.measured import slug, write_json_atomically
from .render import BENCH_FORMAT, jsonable

FORMAT = "iron-snap"
VERSION = 1
DEFAULT_DIR = Path(".iron") / "snaps"
DEFAULT_THRESHOLD = 0.05

Key = tuple[str, str, str, str]


class SnapshotError(IronError):
    """A file that is not a readable snapshot (or bench output) of this version."""


@dataclass(frozen=True)
class Snapshot:
    device: str
    backend: str
    created: str
    iron_version: str
    rows: tuple[BenchRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "device": self.device, "backend": self.backend,
                "created": self.created, "iron_version": self.iron_version, "rows": jsonable(list(self.rows))}


def now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def from_rows(rows: list[BenchRow], device: str | None, backend: str | None, created: str | None = None) -> Snapshot:
    backends = sorted({r.backend for r in rows})
    return Snapshot(device or "unknown device", backend or ",".join(backends) or "unknown",
                    created or now(), __version__, tuple(rows))


def default_path(snap: Snapshot, directory: Path = DEFAULT_DIR) -> Path:
    """``.iron/snaps/<device>-<date>.json``; a second snapshot the same day gets the time as well."""
    stamp = _parse_time(snap.created)
    path = directory / f"{slug(snap.device)}-{stamp:%Y-%m-%d}.json"
    return path if not path.exists() else directory / f"{slug(snap.device)}-{stamp:%Y-%m-%d-%H%M%S}.json"


def _parse_time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return datetime.now(timezone.utc)


def save(snap: Snapshot, path: Path) -> Path:
    try:
        write_json_atomically(path, snap.to_dict())
    except OSError as e:
        raise SnapshotError(f"cannot write the snapshot to {path}: {e.strerror or e}") from None
    return path


def load(path: Path | str) -> Snapshot:
    """The snapshot in ``path``; :class:`SnapshotError` for a missing, corrupt, foreign or newer file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such snapshot (make one with: iron snap)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SnapshotError(f"{path}: cannot read it: {e}") from None
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{path}: not valid JSON (line {e.lineno}: {e.msg}); is it a snapshot?") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        hint = " (bench output: turn it into a snapshot with iron snap --from FILE)" if found == BENCH_FORMAT else ""
        raise SnapshotError(f"{path}: not an Iron snapshot (format {found!r}, expected {FORMAT!r}){hint}")
    if data.get("version") != VERSION:
        raise SnapshotError(f"{path}: snapshot format version {data.get('version')!r}; this Iron ({__version__}) "
                            f"reads version {VERSION}: re-create it with this Iron's iron snap")
    rows = _rows(data.get("rows"), str(path))
    return Snapshot(str(data.get("device") or "unknown device"), str(data.get("backend") or "unknown"),
                    str(data.get("created") or ""), str(data.get("iron_version") or "?"), tuple(rows))


_ROW_FIELDS = {f.name for f in fields(BenchRow)}
_PROFILE_FIELDS = {f.name for f in fields(ProfileInfo)}
_REQUIRED = ("bench", "kernel", "shape", "dtype", "backend", "ok")


def row_from_dict(data: Any, where: str) -> BenchRow:
    """A :class:`BenchRow` from its dict form; fields this Iron does not know are ignored."""
    if not isinstance(data, dict) or any(k not in data for k in _REQUIRED):
        raise SnapshotError(f"{where}: not a bench row (needs {', '.join(_REQUIRED)})")
    row = {k: v for k, v in data.items() if k in _ROW_FIELDS}
    profile = row.get("iron") or {}
    if not isinstance(profile, dict):
        raise SnapshotError(f"{where}: 'iron' must be an object of profile figures")
    row["iron"] = ProfileInfo(**{k: v for k, v in profile.items() if k in _PROFILE_FIELDS})
    return BenchRow(**row)


def _rows(items: Any, where: str) -> list[BenchRow]:
    if not isinstance(items, list):
        raise SnapshotError(f"{where}: 'rows' must be a list of bench rows")
    return [row_from_dict(item, f"{where}, row {i + 1}") for i, item in enumerate(items)]


def read_bench_output(text: str, where: str) -> tuple[list[BenchRow], str | None, str | None]:
    """(rows, device, backend) from what ``iron bench --json`` printed: its JSON document, a snapshot,
    a bare list of rows, or runner protocol lines (one JSON message per line)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return _read_lines(text, where)
    if isinstance(data, list):
        return _rows(data, where), None, None
    if isinstance(data, dict):
        fmt = data.get("format")
        if fmt == FORMAT:
            snap = load_from_data(data, where)
            return list(snap.rows), snap.device, snap.backend
        if fmt not in (None, BENCH_FORMAT):
            raise SnapshotError(f"{where}: format {fmt!r} is not bench output ({BENCH_FORMAT!r})")
        if "rows" in data:
            return _rows(data["rows"], where), data.get("device"), data.get("backend")
        if "bench" in data:
            return [row_from_dict(data, where)], None, None
    raise SnapshotError(f"{where}: not the output of iron bench --json")


def load_from_data(data: dict[str, Any], where: str) -> Snapshot:
    if data.get("version") != VERSION:
        raise SnapshotError(f"{where}: snapshot format version {data.get('version')!r}; this Iron reads {VERSION}")
    return Snapshot(str(data.get("device")), str(data.get("backend")), str(data.get("created")),
                    str(data.get("iron_version")), tuple(_rows(data.get("rows"), where)))


def _read_lines(text: str, where: str) -> tuple[list[BenchRow], str | None, str | None]:
    rows: list[BenchRow] = []
    device = backend = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise SnapshotError(f"{where}, line {n}: not JSON: neither iron bench --json output "
                                "nor runner protocol lines") from None
        if isinstance(obj, dict) and "protocol" in obj:
            try:
                msg = protocol.decode(line)
            except protocol.ProtocolError as e:
                raise SnapshotError(f"{where}, line {n}: {e}") from None
            if msg.kind == "hello":
                device, backend = msg.data.get("device"), msg.data.get("backend")
            elif msg.kind == "bench_row":
                rows.append(row_from_dict(msg.data, f"{where}, line {n}"))
        else:
            rows.append(row_from_dict(obj, f"{where}, line {n}"))
    return rows, device, backend


# ------------------------------------------------------------------ comparison
def key(row: BenchRow) -> Key:
    return (row.bench, row.shape, row.dtype, row.backend)


#: Statuses that make ``iron diff`` exit 1.
REGRESSIONS = ("slower", "failing")


@dataclass(frozen=True)
class RowDelta:
    key: Key
    base: BenchRow | None
    new: BenchRow | None
    #: new / base - 1 of the median time (+0.08: 8% slower) and of Iron's GB/s, where both exist.
    time_change: float | None
    gbps_change: float | None
    #: slower, faster, same, failing, fixed, still failing, no time, new, missing.
    status: str

    @property
    def regression(self) -> bool:
        return self.status in REGRESSIONS


@dataclass(frozen=True)
class Comparison:
    base: Snapshot
    new: Snapshot
    threshold: float
    deltas: tuple[RowDelta, ...]

    @property
    def regressions(self) -> list[RowDelta]:
        return [d for d in self.deltas if d.regression]

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.deltas)


def compare(base: Snapshot, new: Snapshot, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    """Every row of either snapshot with its change; rows in baseline order, then rows only in ``new``."""
    if threshold < 0:
        raise SnapshotError(f"the threshold must be >= 0, got {threshold}")
    old = {key(r): r for r in base.rows}
    cur = {key(r): r for r in new.rows}
    deltas = [_delta(k, old[k], cur.get(k), threshold) for k in old]
    deltas += [_delta(k, None, cur[k], threshold) for k in cur if k not in old]
    return Comparison(base, new, threshold, tuple(deltas))


def _ratio(new: float | None, old: float | None) -> float | None:
    return new / old - 1.0 if new is not None and old else None


def _delta(k: Key, old: BenchRow | None, new: BenchRow | None, threshold: float) -> RowDelta:
    if old is None or new is None:
        return RowDelta(k, old, new, None, None, "new" if old is None else "missing")
    t = _ratio(new.iron_us, old.iron_us) if new.ok and old.ok else None
    g = _ratio(new.iron.gbps, old.iron.gbps) if new.ok and old.ok else None
    if old.ok and not new.ok:
        status = "failing"
    elif not old.ok:
        status = "fixed" if new.ok else "still failing"
    elif t is None:
        status = "no time"
    elif t > threshold:
        status = "slower"
    elif t < -threshold:
        status = "faster"
    else:
        status = "same"
    return RowDelta(k, old, new, t, g, status)


__all__ = ["Comparison", "DEFAULT_DIR", "DEFAULT_THRESHOLD", "FORMAT", "REGRESSIONS", "RowDelta", "Snapshot",
           "SnapshotError", "VERSION", "compare", "default_path", "from_rows", "key", "load", "read_bench_output",
           "row_from_dict", "save"]
