"""iron.runtime.interp: the numpy interpreter that defines what the IR means.

It runs every thread of a launch in lock step, vectorised over threads, and
checks what GPUs leave undefined: out-of-bounds and misaligned accesses,
partial barriers, shared-memory races, reads of inactive lanes, and (opt-in)
global-memory races.
"""

from .device import InterpDevice
from .faults import GlobalMemoryRaceError
from .launch import run

__all__ = ["GlobalMemoryRaceError", "InterpDevice", "run"]
