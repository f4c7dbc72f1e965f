"""CUDA graphs: capture the launches on the device's stream once, replay them with one call.

Between :meth:`Capture.begin` and :meth:`Capture.end` launches are recorded
into a graph instead of running.  Only launches whose tensors are already
on the GPU (torch, CuPy, CudaArray) can be captured: host arrays would need
copies and a wait the graph cannot hold.  Capture is thread-local (other
threads' CUDA calls are not affected), starts after a device-wide
synchronisation so the graph depends on nothing outside it, and a failure
inside it ends the capture so the stream is usable again.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import LaunchError
from .driver import check


class CudaGraph:
    """An instantiated graph of ``launches`` kernel launches; free it with :meth:`close` (or the device)."""

    def __init__(self, drv: Any, graph: Any, executable: Any, launches: int) -> None:
        self.drv = drv
        self.graph = graph
        self.executable = executable
        self.launches = launches
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.drv.cuGraphExecDestroy(self.executable)
            self.drv.cuGraphDestroy(self.graph)

    def __repr__(self) -> str:
        return f"<CudaGraph of {self.launches} launch(es){' (closed)' if self.closed else ''}>"


class Capture:
    """Capture state of one stream."""

    def __init__(self, drv: Any, stream: Any) -> None:
        self.drv = drv
        self.stream = stream
        self.active = False
        self.launches = 0
        self.graphs: list[CudaGraph] = []

    def begin(self) -> None:
        if self.active:
            raise LaunchError("a CUDA graph capture is already in progress on this device; end_capture() first")
        mode = self.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(self.drv, self.drv.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")
        self.active = True
        self.launches = 0

    def end(self) -> CudaGraph:
        if not self.active:
            raise LaunchError("end_capture() without begin_capture()")
        self.active = False
        drv = self.drv
        graph = check(drv, drv.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        try:
            executable = check(drv, drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        except BaseException:
            drv.cuGraphDestroy(graph)
            raise
        g = CudaGraph(drv, graph, executable, self.launches)
        self.graphs.append(g)
        return g

    def abort(self) -> None:
        """End a capture that failed, discarding its graph."""
        if self.active:
            self.active = False
            result = self.drv.cuStreamEndCapture(self.stream)
            graph = result[1] if isinstance(result, tuple) and len(result) > 1 else None
            if graph is not None and int(result[0]) == 0:
                self.drv.cuGraphDestroy(graph)

    def launch(self, graph: CudaGraph, stream: Any) -> None:
        if graph.closed:
            raise LaunchError("this CUDA graph was closed")
        if self.active:
            raise LaunchError("cannot launch a graph while capturing; end_capture() first")
        check(self.drv, self.drv.cuGraphLaunch(graph.executable, stream), "cuGraphLaunch")

    def close(self) -> None:
        self.abort()
        for g in self.graphs:
            g.close()
        self.graphs.clear()
