"""iron.runtime.interp: the numpy interpreter that defines what the IR means.

It runs every thread of a launch in lock step, vectorised over threads, and
checks what GPUs leave undefined: out-of-bounds and misaligned accesses,
partial barriers, shared-memory races, reads of inactive lanes.
"""

from .device import InterpDevice
from .launch import run

__all__ = ["InterpDevice", "run"]
