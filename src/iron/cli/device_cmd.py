"""``iron device``: every backend Iron knows, the device each found (or why none), the toolchains;
``--probe`` measures the device's real ceilings with Iron's own probe kernels."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import config
from ..core.errors import IronError
from ..harness import device_specs, measured
from . import render

HELP = ("show each backend's device (name, arch, units, memory, clocks, peak bandwidth and FLOP/s, features) or "
        "why it is absent, and the toolchains; --probe measures the real ceilings")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..runtime import KNOWN_BACKENDS

    p.add_argument("--backend", choices=("auto", *KNOWN_BACKENDS),
                   help="only this backend (with --probe: the one to measure; default: the configured backend)")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.add_argument("--probe", action="store_true",
                   help="measure copy bandwidth, f32 FMA and matrix-unit throughput with Iron probe kernels and "
                        "save them for the bench roofline")
    p.add_argument("--probe-size", choices=("auto", "small", "full"), default="auto",
                   help="probe problem sizes: small on the interpreter and CPU drivers, full on a GPU (default: auto)")
    p.add_argument("--no-save", action="store_true", help="with --probe: do not save the measured ceilings")
    p.add_argument("-v", "--verbose", action="store_true", help="every field the driver reports, ids included")


#: Driver fields left out of the text view unless -v (ids and bookkeeping; --json keeps everything).
QUIET_FIELDS = frozenset({"index", "vendor_id", "device_id", "pipeline_cache_uuid", "queue_family",
                          "timestamp_period", "timestamp_valid_bits", "extension_count", "driver_version"})


# ------------------------------------------------------------------ survey
def survey(names: tuple[str, ...]) -> list[dict[str, Any]]:
    """For each backend: the device it found with its description and ceilings, or why it found none."""
    from ..harness import probes
    from ..runtime import BackendUnavailable, get_device

    out = []
    for name in names:
        try:
            dev = get_device(name)
        except BackendUnavailable as e:
            out.append({"backend": name, "available": False, "reason": str(e)})
            continue
        except Exception as e:  # a driver that fails to start is reported, not raised
            out.append({"backend": name, "available": False, "reason": f"{type(e).__name__}: {e}".strip()})
            continue
        info = probes.device_info(dev) or _interp_info(dev)
        dname = probes.device_name(dev)
        spec = device_specs.lookup(dname)
        out.append({"backend": name, "available": True, "name": dname, "target": dev.target, "info": info,
                    "specs": spec.to_dict() if spec else None, "measured": measured.peaks(dname)})
    return out


def _interp_info(dev: Any) -> dict[str, Any]:
    if dev.name != "interp":
        return {}
    import numpy

    return {"name": "Iron interpreter (numpy)", "kind": "CPU, lock-step SIMT semantics",
            "simd_width": config.get("simd_width"), "checks": config.get("interp_checks"),
            "numpy": numpy.__version__, "cpu_count": os.cpu_count()}


def toolchains() -> list[dict[str, Any]]:
    from ..codegen.toolchains import inventory

    return [{"name": t.name, "tool": t.tool, "purpose": t.purpose, "available": t.available, "version": t.version,
             "reason": t.reason, "install": t.install} for t in inventory()]


# ------------------------------------------------------------------ rendering
def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def _value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and value >= 1 << 20 and any(w in key for w in ("memory", "bytes", "shared", "range")):
        return _bytes(value)
    if isinstance(value, dict):
        if value and all(isinstance(v, bool) for v in value.values()):
            return ", ".join(k for k, v in value.items() if v) or "none"
        return ", ".join(f"{k}={_value(k, v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        items = [_value(key, v) if not isinstance(v, (list, tuple)) else "x".join(map(str, v)) for v in value]
        shown = ", ".join(items[:12]) + (f", … (+{len(items) - 12})" if len(items) > 12 else "")
        return shown or "none"
    return str(value)


def _tflops(v: float | None) -> str:
    return "—" if v is None else f"{v:g} TFLOP/s"


def _peaks(entry: dict[str, Any]) -> list[tuple[str, str]]:
    spec, got = entry["specs"], entry["measured"]
    rows: list[tuple[str, str]] = []
    if spec:
        rows += [("peak bandwidth", f"{spec['bandwidth_gbps']:g} GB/s" if spec["bandwidth_gbps"] else "—"),
                 ("peak f32", _tflops(spec["f32_tflops"])),
                 ("peak f16 / bf16", f"{_tflops(spec['f16_tflops'])} / {_tflops(spec['bf16_tflops'])}"),
                 ("peak matrix f16 / bf16", f"{_tflops(spec['tensor_f16_tflops'])} / "
                                            f"{_tflops(spec['tensor_bf16_tflops'])} (dense)"),
                 ("peaks from", spec["source"])]
    else:
        rows.append(("peaks", "not in Iron's device table (the roofline stays blank unless measured: "
                              "iron device --probe)"))
    if got:
        parts = [f"bandwidth {got['bandwidth_gbps']:.1f} GB/s" if "bandwidth_gbps" in got else "",
                 f"f32 {got['f32_gflops']:.1f} GFLOP/s" if "f32_gflops" in got else "",
                 f"matrix f16 {got['matrix_f16_gflops']:.1f} GFLOP/s" if "matrix_f16_gflops" in got else ""]
        rows.append(("measured", ", ".join(p for p in parts if p) + f" ({got.get('created', 'undated')})"))
    return rows


def survey_text(entries: list[dict[str, Any]], tools: list[dict[str, Any]] | None, verbose: bool = False) -> str:
    width = max(len(e["backend"]) for e in entries)
    out = ["iron device", ""]
    for e in entries:
        what = e["name"] if e["available"] else e["reason"]
        out.append(f"{e['backend'].ljust(width)}  {render.OK if e['available'] else render.FAIL}  {what}")
    for e in entries:
        if not e["available"]:
            continue
        out += ["", f"{e['backend']} · {e['name']} (target {e['target']})"]
        pairs = [(k, _value(k, v)) for k, v in e["info"].items()
                 if k != "name" and (verbose or k not in QUIET_FIELDS)]
        if e["backend"] != "interp" or e["measured"]:
            pairs += _peaks(e)
        key_width = max(len(k) for k, _ in pairs)
        out += [f"  {k.ljust(key_width)}  {v}" for k, v in pairs]
    if tools is not None:
        out += ["", "toolchains"]
        tw = max(len(t["name"]) for t in tools)
        for t in tools:
            state = f"{render.OK} {t['version']}" if t["available"] else f"{render.FAIL} {t['reason']}"
            out.append(f"  {t['name'].ljust(tw)}  {state}")
            out.append(f"  {' ' * tw}  {t['purpose']}" + ("" if t["available"] else f"; install: {t['install']}"))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ probing
def probe(args: argparse.Namespace) -> int:
    from ..harness import probes
    from ..runtime import best_backend, get_device

    backend = args.backend or str(config.get("backend"))
    if backend == "auto":  # the probes make their own data: the best device here, as iron test / bench pick
        backend = best_backend()
    dev = get_device(backend)
    with render.Progress(total=len(probes.PROBES), enabled=not args.json) as progress:
        def step(name: str) -> None:
            progress.start(f"probe {name}")
            progress.done += 1

        record = probes.run_probes(dev, args.probe_size, progress=step)
    path = None if args.no_save else measured.save(record)
    if args.json:
        render.print_json({**record, "saved_to": str(path) if path else None})
    else:
        sys.stdout.write(probe_text(record, path))
    if record["errors"] and not record["probes"]:
        raise IronError(f"every probe failed on {record['device']}: " + "; ".join(record["errors"].values()))
    return 0


def probe_text(record: dict[str, Any], path: Any) -> str:
    spec = device_specs.lookup(record["device"])
    clock = next((p["clock"] for p in record["probes"].values()), "—")
    out = [f"iron device --probe · {record['backend']} · {record['device']} · {record['size']} sizes, {clock}", ""]

    def of_peak(value: float, peak: float | None, unit: str) -> str:
        return f" ({value / peak:.0%} of the datasheet's {peak:g} {unit})" if peak else ""

    p = record["probes"]
    if "copy" in p:
        gbps = p["copy"]["bandwidth_gbps"]
        out.append(f"  copy bandwidth   {gbps:10.1f} GB/s" + of_peak(gbps, spec and spec.bandwidth_gbps, "GB/s"))
    if "fma" in p:
        g = p["fma"]["f32_gflops"]
        peak = spec.f32_tflops * 1e3 if spec and spec.f32_tflops else None
        out.append(f"  f32 FMA          {g:10.1f} GFLOP/s" + of_peak(g, peak, "GFLOP/s"))
    if "mma" in p:
        m = p["mma"]
        peak = spec.tensor_f16_tflops * 1e3 if spec and spec.tensor_f16_tflops else None
        out.append(f"  matrix f16->f32  {m['matrix_f16_gflops']:10.1f} GFLOP/s" + of_peak(m["matrix_f16_gflops"],
                                                                                         peak, "GFLOP/s")
                   + f"  [{m['shape']}, {m['matrix_unit']}]")
    for name, why in record["errors"].items():
        out.append(f"  {render.FAIL} {name}: {why}")
    out.append("")
    out.append(f"saved to {path} (the bench roofline uses these ceilings)" if path else "not saved")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from ..runtime import KNOWN_BACKENDS

    if args.probe:
        return probe(args)
    names = KNOWN_BACKENDS if args.backend in (None, "auto") else (args.backend,)
    entries = survey(tuple(names))
    tools = toolchains() if args.backend in (None, "auto") else None
    if args.json:
        render.print_json({"backends": entries, "toolchains": tools})
    else:
        sys.stdout.write(survey_text(entries, tools, args.verbose))
    return 0
