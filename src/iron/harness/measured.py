"""The ceilings ``iron device --probe`` measured, kept per device in Iron's cache directory.

One small JSON file per device, ``<cache_dir>/probes/<device-slug>.json``, written atomically; a file
that is missing, corrupt, of another format or of another device (its key, the device name, is
stored in it and compared) reads as "nothing measured", never as numbers.  The ``probes`` folder is
marked as Iron's when made (:func:`iron.codegen.diskcache.ensure_folder`), and :func:`is_probe_file`
tells ``iron clean`` which files in it are Iron's.  The
bench roofline uses them through ``metrics.profile(..., measured_peaks=peaks(device_name))``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .. import config
from ..codegen import diskcache

FORMAT = "iron-probe"
VERSION = 1

#: Keys of a probe record that ``metrics.profile`` reads as ceilings.
PEAK_KEYS = ("bandwidth_gbps", "f32_gflops", "f16_gflops", "bf16_gflops", "matrix_f16_gflops", "matrix_bf16_gflops")


def slug(name: str) -> str:
    """A file-name-safe form of a device name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s[:80] or "device"


def directory() -> Path | None:
    """Where probe results live, or None when the caches are off (``cache_dir = off``)."""
    base = config.cache_dir()
    return None if base is None else base / "probes"


def path_for(device_name: str) -> Path | None:
    d = directory()
    return None if d is None else d / f"{slug(device_name)}.json"


def write_json_atomically(path: Path, data: Any) -> None:
    """``data`` as indented JSON at ``path``; readers see the old file or the new one, never half of one."""
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    diskcache.replace_atomically(path, text.encode("utf-8"))


def save(record: dict[str, Any]) -> Path | None:
    """Store a probe record (it must carry ``device``); returns the path, or None when caches are off."""
    path = path_for(record["device"])
    if path is None:
        return None
    diskcache.ensure_folder(path.parent)  # marked as Iron's when made here; if it cannot be, the write says why
    write_json_atomically(path, {"format": FORMAT, "version": VERSION, **record})
    return path


def load(device_name: str) -> dict[str, Any] | None:
    """The probe record saved for ``device_name``, or None (none saved, unreadable, or not this format)."""
    path = path_for(device_name)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        return None
    if data.get("device") != device_name:
        return None
    return data


def is_probe_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a symlink) holding a probe record of this format."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def peaks(device_name: str | None) -> dict[str, Any] | None:
    """The measured ceilings for ``device_name`` in the form ``metrics.profile(measured_peaks=...)`` takes."""
    record = load(device_name) if device_name else None
    if record is None:
        return None
    out = {k: float(record[k]) for k in PEAK_KEYS if isinstance(record.get(k), (int, float)) and record[k] > 0}
    if not out:
        return None
    if record.get("created"):
        out["created"] = str(record["created"])
    return out


__all__ = ["FORMAT", "PEAK_KEYS", "VERSION", "directory", "is_probe_file", "load", "path_for", "peaks", "save",
           "slug", "write_json_atomically"]
