"""Which stream a launch goes to, one order across stream changes, and event timing.

A launch whose arguments carry a producer's stream (torch's or CuPy's
current stream) is enqueued there, like one of that library's own ops;
otherwise on the device's own non-blocking stream.  :class:`StreamOrder`
keeps every Iron launch after the previous one even when consecutive
launches go to different streams: on a change it records an event on the
old stream and makes the new one wait for it (nothing is done while the
stream stays the same, the common case).  :class:`Timer` brackets work
with two CUDA events on its stream and reads the time between them.
"""

from __future__ import annotations

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
        check(drv, drv.cuEventRecord(self._event, self.stream(self.last)), "cuEventRecord")
        check(drv, drv.cuStreamWaitEvent(self.stream(handle), self._event, 0), "cuStreamWaitEvent")
        self.last = handle
        self.switches += 1

    def reset(self) -> None:
        """After a device-wide synchronisation nothing is pending: no wait is needed on the next change."""
        self.last = self.own_handle

    def close(self) -> None:
        self.drv.cuEventDestroy(self._event)


class Timer:
    """GPU time between two points of a stream, in milliseconds (CUDA events)."""

    def __init__(self, drv: Any) -> None:
        self.drv = drv
        flags = drv.CUevent_flags.CU_EVENT_DEFAULT
        self._start = check(drv, drv.cuEventCreate(flags), "cuEventCreate")
        self._end = check(drv, drv.cuEventCreate(flags), "cuEventCreate")

    def start(self, stream: Any) -> None:
        check(self.drv, self.drv.cuEventRecord(self._start, stream), "cuEventRecord")

    def stop(self, stream: Any) -> None:
        check(self.drv, self.drv.cuEventRecord(self._end, stream), "cuEventRecord")

    def elapsed_ms(self) -> float:
        """Waits for the end event, then the time from start to end."""
        drv = self.drv
        check(drv, drv.cuEventSynchronize(self._end), "cuEventSynchronize")
        return float(check(drv, drv.cuEventElapsedTime(self._start, self._end), "cuEventElapsedTime"))

    def close(self) -> None:
        self.drv.cuEventDestroy(self._start)
        self.drv.cuEventDestroy(self._end)
