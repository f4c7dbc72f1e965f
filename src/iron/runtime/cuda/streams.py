"""Which stream a launch goes to, one order across stream changes, and event timing.

A launch whose arguments carry a producer's stream (torch's or CuPy's
current stream) is enqueued there, like one of that library's own ops;
otherwise on the device's own non-blocking stream.  :class:`StreamOrder`
keeps every Iron launch after the previous one even when consecutive
launches go to different streams: on a change it records an event on the
old stream and makes the new one wait for it (nothing is done while the
stream stays the same, the common case).  :class:`Timer` brackets work
with two CUDA events on its stream and reads the time between them, after
a short spin kernel (:class:`Lead`) so that the start event fires only once
the launch it times is already queued.
"""

from __future__ import annotations

import ctypes
from typing import Any

from .driver import check


class StreamOrder:
    """Hands out streams by raw handle, ordering each change of stream after the previous one's work."""

    def __init__(self, drv: Any, own: Any) -> None:
        self.drv = drv
        self.own = own
        self.own_handle = int(own)
        self.last = self.own_handle
        self._streams = {self.own_handle: own}
        flags = drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self._event = check(drv, drv.cuEventCreate(flags), "cuEventCreate")
        self.switches = 0

    def stream(self, handle: int) -> Any:
        """The CUstream of a raw handle (0: legacy default, 1: CU_STREAM_LEGACY, 2: CU_STREAM_PER_THREAD)."""
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self.drv.CUstream(handle)
        return s

    def enter(self, handle: int) -> Any:
        """The stream to launch on next; waits for the previous stream's work when it is another one."""
        if handle != self.last:
            self.switch(handle)
        s = self._streams.get(handle)
        return s if s is not None else self.stream(handle)

    def switch(self, handle: int) -> None:
        drv = self.drv
        old, new = self.stream(self.last), self.stream(handle)
        # A stream being captured into a CUDA graph (torch.cuda.graph) may not wait on work outside the
        # capture: there the captured stream's own order is the order, as for torch's ops.
        if not (self.capturing(old) or self.capturing(new)):
            check(drv, drv.cuEventRecord(self._event, old), "cuEventRecord")
            check(drv, drv.cuStreamWaitEvent(new, self._event, 0), "cuStreamWaitEvent")
        self.last = handle
        self.switches += 1

    def capturing(self, stream: Any) -> bool:
        """Whether ``stream`` is being captured (or, the legacy stream during another's capture, cannot be
        asked: CUDA refuses the query then, and any wait on it)."""
        drv = self.drv
        err, status = drv.cuStreamIsCapturing(stream)
        none = drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
        return int(err) != 0 or status != none  # 0: CUDA_SUCCESS

    def reset(self) -> None:
        """After a device-wide synchronisation nothing is pending: no wait is needed on the next change."""
        self.last = self.own_handle

    def close(self) -> None:
        self.drv.cuEventDestroy(self._event)


#: The spin kernel in PTX (the driver compiles it for any GPU since sm_50): one thread waits on the
#: global nanosecond timer, so its length does not depend on the SM clock.
LEAD_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry iron_lead_spin(.param .u64 ns)
{
    .reg .u64 %rd<5>;
    .reg .pred %p;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
SPIN:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra SPIN;
    ret;
}
"""

#: How long the spin keeps the stream busy before a timed launch: well above the host's cost of one
#: ``cuLaunchKernel`` from Python (a few microseconds), far below any kernel worth timing's repetitions.
LEAD_NS = 20_000


class Lead:
    """Keeps a stream busy for a moment before a start event, so the event does not fire while the host is
    still issuing the launch being timed: an idle GPU would otherwise time the host's launch latency too
    (the same thing the reference side does with ``torch.cuda._sleep``).  Loaded on first use; a driver
    that cannot load it (no JIT for this PTX) leaves timing as it was, without the lead."""

    def __init__(self, drv: Any, ns: int = LEAD_NS) -> None:
        self.drv = drv
        self._module: Any = None
        self._function: Any = None
        self.failed = False
        self._value = ctypes.c_uint64(ns)
        self._params = (ctypes.c_void_p * 1)(ctypes.addressof(self._value))

    def __call__(self, stream: Any) -> None:
        if self.failed:
            return
        drv = self.drv
        if self._function is None:
            err, module = drv.cuModuleLoadData(LEAD_PTX + b"\0")
            if int(err):
                self.failed = True
                return
            err, function = drv.cuModuleGetFunction(module, b"iron_lead_spin")
            if int(err):
                drv.cuModuleUnload(module)
                self.failed = True
                return
            self._module, self._function = module, function
        (err,) = drv.cuLaunchKernel(self._function, 1, 1, 1, 1, 1, 1, 0, stream, ctypes.addressof(self._params), 0)
        if int(err):
            self.failed = True

    def close(self) -> None:
        if self._module is not None:
            self.drv.cuModuleUnload(self._module)
            self._module = self._function = None


class Timer:
    """GPU time between two points of a stream, in milliseconds (CUDA events), each start led by a
    :class:`Lead` so that only the device's own time counts."""

    def __init__(self, drv: Any, lead: bool = True) -> None:
        self.drv = drv
        flags = drv.CUevent_flags.CU_EVENT_DEFAULT
        self._start = check(drv, drv.cuEventCreate(flags), "cuEventCreate")
        self._end = check(drv, drv.cuEventCreate(flags), "cuEventCreate")
        self.lead = Lead(drv) if lead else None

    def start(self, stream: Any, lead: bool = True) -> None:
        """Record the start event on ``stream``, after the lead unless ``lead`` is False (a capture)."""
        if lead and self.lead is not None:
            self.lead(stream)
        check(self.drv, self.drv.cuEventRecord(self._start, stream), "cuEventRecord")

    def stop(self, stream: Any) -> None:
        check(self.drv, self.drv.cuEventRecord(self._end, stream), "cuEventRecord")

    def elapsed_ms(self) -> float:
        """Waits for the end event, then the time from start to end."""
        drv = self.drv
        check(drv, drv.cuEventSynchronize(self._end), "cuEventSynchronize")
        return float(check(drv, drv.cuEventElapsedTime(self._start, self._end), "cuEventElapsedTime"))

    def close(self) -> None:
        if self.lead is not None:
            self.lead.close()
        self.drv.cuEventDestroy(self._start)
        self.drv.cuEventDestroy(self._end)
