"""The machine code (SASS) of a CUBIN, through nvdisasm from the ``nvidia-cuda-nvdisasm`` wheel (no GPU needed).

PTX says what Iron asked for; SASS is what the GPU runs after ptxas: whether the multiplies are one
``HGMMA`` stream, whether a block barrier (``BAR.SYNC``) sits in a main loop, whether the tile copies are
``UTMALDG`` and the register budgets ``USETMAXREG``.  :func:`disassemble` gives the listing;
:func:`loops` finds its loops (a backward branch to a label before it), so a test can say what a kernel's
main loop holds.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .common import ToolchainError, ToolchainMissing, decode, run_tool

TOOL = "nvdisasm"

#: The wheel that carries nvdisasm, pinned with NVRTC (scripts/setup.sh installs it).
INSTALL = "python3 -m pip install nvidia-cuda-nvdisasm==13.5.37"
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)(.*?);", re.M)
_LABEL = re.compile(r"^(\.L_x_\d+):", re.M)
_BRANCH_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str
    operands: str


def nvdisasm() -> Path | None:
    """The nvdisasm binary of the installed wheel, or None."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for candidate in (Path(root) / "cu13" / "bin" / "nvdisasm", Path(root) / "cuda_nvdisasm" / "bin" / "nvdisasm"):
            if candidate.is_file():
                return candidate
    return None


def disassemble(cubin: bytes) -> str:
    """The SASS listing of ``cubin`` (control flow labelled); ToolchainMissing without nvdisasm."""
    tool = nvdisasm()
    if tool is None:
        raise ToolchainMissing(TOOL, INSTALL, "the nvidia-cuda-nvdisasm wheel is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        done = run_tool([str(tool), "-c", "-g", str(path)], tool=TOOL, install=INSTALL)
    if done.returncode:
        raise ToolchainError(TOOL, f"could not disassemble the CUBIN: {decode(done.stderr).strip()}")
    return decode(done.stdout)


def instructions(listing: str) -> list[Instruction]:
    """The instructions of a listing, in address order."""
    return [Instruction(int(m.group(1), 16), m.group(2), m.group(3).strip()) for m in _INSTRUCTION.finditer(listing)]


def loops(listing: str) -> list[list[Instruction]]:
    """Each loop's instructions: from a label to a branch after it that jumps back to it (innermost and
    outermost alike, in address order of their ends)."""
    labels: dict[str, int] = {}
    for m in _LABEL.finditer(listing):
        following = _INSTRUCTION.search(listing, m.end())
        if following is not None:
            labels[m.group(1)] = int(following.group(1), 16)
    code = instructions(listing)
    out = []
    for ins in code:
        target = _BRANCH_TARGET.search(ins.operands)
        if ins.opcode == "BRA" and target and labels.get(target.group(1), ins.address + 1) <= ins.address:
            start = labels[target.group(1)]
            out.append([i for i in code if start <= i.address <= ins.address])
    return out
