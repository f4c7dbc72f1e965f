"""Reading an ``iron build`` output folder: its manifest, each variant's ABI, and the binaries for a GPU.

Needs no GPU.  ``manifest.json`` (schema ``iron.manifest/1``, written by
:mod:`iron.harness.build`) lists every kernel variant with its entry point,
ABI and files; CUBIN files are ``cubin/<entry>.<arch>.cubin`` and PTX
``ptx/<entry>.<arch>.ptx``.  :func:`pick_binary` chooses what runs on a GPU
(CUBIN for a compatible architecture first, else PTX the driver compiles;
a listed file that is missing is passed over),
and :func:`cubin_params` reads the kernel's parameter sizes from the CUBIN
itself, so a binary that does not match its manifest's ABI is refused
instead of being launched with a wrong parameter block.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...codegen.abi import Field, KernelABI, TensorArg
from ...codegen.tensor_maps import TensorMap
from ...core import dtypes as D
from .arch import binary_runs_on, sm_number
from .errors import AotError

SCHEMA = "iron.manifest/1"
_FILE = re.compile(r"^(?P<folder>cubin|ptx)/(?P<entry>[A-Za-z0-9_]+)\.(?P<arch>(?:sm|compute)_\d+[af]?)\."
                   r"(?P<suffix>cubin|ptx)$")
_KPARAM_INFO = 0x17


@dataclass(frozen=True)
class Variant:
    kernel: str
    entry: str
    binding: dict[str, str]
    abi: KernelABI
    files: tuple[str, ...]
    shared_bytes: int
    #: Parameter names in call order when the manifest records them, else None (ABI order: tensors, scalars).
    order: tuple[str, ...] | None
    #: From the cuda target entry where the build recorded them (newer manifests), else None.
    max_group_threads: int | None
    whole_group: bool | None
    #: Dynamic shared memory the cuda module launches with (past the static 48 KiB); 0 in older manifests.
    dynamic_shared_bytes: int = 0


def abi_from_json(d: dict[str, Any]) -> KernelABI:
    """The inverse of ``KernelABI.to_json``."""
    tensors = tuple(TensorArg(t["name"], D.by_name(t["dtype"]), int(t["binding"]), t["access"]) for t in d["tensors"])
    fields = tuple(Field(f["name"], D.by_name(f["storage"]), D.by_name(f["dtype"]), int(f["offset"]), f["kind"],
                         f.get("of"), f.get("axis")) for f in d["params"])
    maps = tuple(TensorMap.from_json(m) for m in d.get("maps", ()))
    return KernelABI(d["entry"], tensors, fields, int(d["params_size"]), maps)


def read_manifest(folder: Path) -> list[Variant]:
    """Every kernel variant of the build in ``folder`` (AotError when it is not a readable build)."""
    path = folder / "manifest.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise AotError(f"{path} does not exist: build with `iron build --emit cubin,manifest --out {folder}`") \
            from None
    except (OSError, ValueError) as e:
        raise AotError(f"{path}: cannot read the manifest ({e})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise AotError(f"{path}: manifest schema {got!r}, this Iron reads {SCHEMA!r}; rebuild with this Iron")
    out = []
    try:
        for k in data["kernels"]:
            for v in k["variants"]:
                cuda = v.get("targets", {}).get("cuda", {})
                order = v.get("params")
                out.append(Variant(k["name"], v["entry"], dict(v.get("binding", {})), abi_from_json(v["abi"]),
                                   tuple(v.get("files", ())), int(v.get("shared_memory_bytes", 0)),
                                   tuple(order) if order else None, cuda.get("max_group_threads"),
                                   cuda.get("whole_group"), int(cuda.get("dynamic_shared_bytes", 0))))
    except (KeyError, TypeError, ValueError) as e:
        raise AotError(f"{path}: a kernel entry is malformed ({type(e).__name__}: {e})") from None
    return out


def pick_binary(variant: Variant, folder: Path, device_arch: str) -> tuple[Path, str, str]:
    """(file, "cubin" | "ptx", its arch) of ``variant`` that runs on ``device_arch``; AotError says why none."""
    found = []
    for rel in variant.files:
        m = _FILE.match(rel)
        if m and m["entry"] == variant.entry and m["folder"] == m["suffix"]:
            found.append((m["suffix"], m["arch"], folder / rel))
    runnable = [(fmt, arch, p) for fmt, arch, p in found if binary_runs_on(arch, fmt, device_arch)]
    runnable.sort(key=lambda f: (f[0] != "cubin", -sm_number(f[1])))
    if not runnable:
        what = ", ".join(f"{fmt} for {arch}" for fmt, arch, _ in found) or "no CUBIN or PTX file"
        raise AotError(f"'{variant.entry}': the build has {what}; none runs on this GPU ({device_arch}): "
                       f"rebuild for it (iron build --emit cubin builds for sm_90)")
    present = [f for f in runnable if f[2].is_file()]
    if not present:
        raise AotError(f"'{variant.entry}': {runnable[0][2]} is listed in the manifest but missing")
    fmt, arch, path = present[0]
    return path, fmt, arch


def cubin_params(cubin: bytes, entry: str) -> list[int] | None:
    """The byte size of each parameter of ``entry`` in ``cubin`` (EIATTR_KPARAM_INFO), or None if unreadable."""
    from ...codegen.toolchains.cubin import nv_info_attributes

    params: dict[int, int] = {}
    try:
        for attr, at, size in nv_info_attributes(cubin, f".nv.info.{entry}"):
            if attr == _KPARAM_INFO and size >= 12:
                _, ordinal, _, flags = struct.unpack_from("<IHHI", cubin, at)
                params[ordinal] = (flags >> 18) & 0x3FFF
    except (ValueError, struct.error, IndexError):
        return None
    return [params[i] for i in sorted(params)] if params else None


def abi_mismatch(abi: KernelABI, sizes: list[int] | None) -> str | None:
    """Why a binary's parameter sizes do not fit ``abi`` (tensor pointers, then the block); None when they do."""
    if sizes is None:
        return None
    want = [8] * len(abi.tensors) + [abi.params_size]
    if sizes != want:
        return f"the binary takes parameters of {sizes} bytes, the manifest's ABI {want}"
    return None
