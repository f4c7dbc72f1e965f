"""Registers per kernel read from a CUBIN itself, for when ptxas's ``-v`` report is missing from the log.

NVRTC 13.0 (the H200 machine's) was seen to return an empty log for some programs while the
same call printed the report for others; the CUBIN always carries the register count, the
figure that decides occupancy.  A CUBIN is an ELF64 file whose ``.nv.info`` section is a list
of attributes, each ``format (u8), attribute (u8)`` then either a 16-bit value or a 16-bit size
and that many bytes; ``EIATTR_REGCOUNT`` (0x2f) holds ``(symbol index, registers)`` per kernel,
the symbol naming the kernel in ``.symtab``.  Shared memory, spills and stack frames are left
None here: the emitter knows the static shared memory, and only ptxas reports spills.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

_ELF_MAGIC = b"\x7fELF"


_SVAL = 0x04
_REGCOUNT = 0x2F


def _sections(elf: bytes) -> dict[str, tuple[int, int, int]]:
    """Each section of a little-endian ELF64 file by name: (offset, size, link)."""
    if len(elf) < 64 or elf[:4] != _ELF_MAGIC or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a little-endian ELF64 file (a CUBIN)")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    return {_string(elf, names_at + h[0]): (h[4], h[5], h[6]) for h in headers}


def _string(elf: bytes, at: int) -> str:
    return elf[at:elf.index(b"\0", at)].decode("ascii", "replace")


def _symbol_names(elf: bytes, sections: dict[str, tuple[int, int, int]]) -> list[str]:
    offset, size, _ = sections[".symtab"]
    strings = sections[".strtab"][0]
    return [_string(elf, strings + struct.unpack_from("<I", elf, offset + i)[0]) for i in range(0, size, 24)]


def nv_info_attributes(cubin: bytes, section: str = ".nv.info") -> Iterator[tuple[int, int, int]]:
    """``(attribute, offset of its data, data size)`` of each sized attribute in an ``.nv.info`` section."""
    sections = _sections(cubin)
    if section not in sections:
        return
    offset, size, _ = sections[section]
    at, end = offset, offset + size
    while at + 4 <= end:
        fmt, attr, value = struct.unpack_from("<BBH", cubin, at)
        at += 4
        if fmt != _SVAL:
            continue
        yield attr, at, value
        at += value


def register_counts(cubin: bytes) -> dict[str, int]:
    """Registers per thread of every kernel in ``cubin`` (``EIATTR_REGCOUNT`` of ``.nv.info``)."""
    sections = _sections(cubin)
    if ".nv.info" not in sections:
        return {}
    symbols = _symbol_names(cubin, sections)
    counts: dict[str, int] = {}
    for attr, at, size in nv_info_attributes(cubin):
        if attr == _REGCOUNT and size == 8:
            symbol, registers = struct.unpack_from("<II", cubin, at)
            counts[symbols[symbol]] = registers
    return counts


def resource_report(cubin: bytes) -> dict[str, Any]:
    """A report shaped like ptxas's (``nvrtc.parse_ptxas_report``): registers from ``cubin``, the rest None."""
    kernels = {name: {"registers": regs, "shared_bytes": None, "constant_bytes": None, "barriers": None,
                      "stack_bytes": None, "spill_stores": None, "spill_loads": None}
               for name, regs in register_counts(cubin).items()}
    return {"kernels": kernels, "registers": max((k["registers"] for k in kernels.values()), default=0),
            "shared_bytes": None, "spill_stores": None, "spill_loads": None, "source": "cubin"}
