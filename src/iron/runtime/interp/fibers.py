"""Branches that wait on each other: the interpreter's fibers.

The interpreter runs a group's threads in lock-step, an ``if`` running its then-side to the end before its
else-side.  A GPU runs the two sides concurrently, and warp-specialised kernels rely on it: a producer role
fills a ring of buffers while a consumer role empties it, each waiting on the other's asynchronous barriers.
So when both sides of an ``if`` have threads and may wait on a barrier, each side runs as a *fiber*: a wait
whose phase has not completed suspends its fiber and the next one that can go on runs, until both sides are
done.  When no fiber can go on, the kernel would hang on a GPU: the fiber that found it reports its wait,
naming the waits of the others.

Fibers are OS threads of which exactly one runs at a time, handing over at waits; the schedule is fixed (the
then-side first, each running until it must wait), so a run is deterministic.  Kernels without such branches
never leave the main fiber.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

#: Fiber states.  A fiber may run when new, when blocked on a wait that can now pass, or when joining
#: children that all finished.
_NEW, _RUNNING, _BLOCKED, _JOINING, _DONE = "new", "running", "blocked", "joining", "done"


class _Aborted(BaseException):
    """Unwinds a fiber whose sibling failed (never seen outside this module)."""


class Fiber:
    """One side of a branch: its thread, its state and its own stack of enclosing loops."""

    def __init__(self, parent: Fiber | None, loops: list[Any]):
        self.parent = parent
        self.loops = loops
        self.state = _NEW
        self.go = threading.Semaphore(0)
        self.children: list[Fiber] = []
        self.ready: Callable[[], bool] | None = None
        self.stuck: Callable[[list[str]], BaseException] | None = None
        self.where = ""
        self.result: Any = None
        self.error: BaseException | None = None
        self.abort = False
        self.deadlocked = False

    def can_go(self) -> bool:
        if self.state == _NEW:
            return True
        if self.state == _BLOCKED:
            return self.abort or (self.ready is not None and self.ready())
        if self.state == _JOINING:
            return all(c.state == _DONE for c in self.children)
        return False

    def cancel(self) -> None:
        """Unwind this fiber and every fiber under it the next time each runs."""
        self.abort = True
        for c in self.children:
            c.cancel()


class Fibers:
    """The fibers of one launch, in a fixed order: each new pair right after the fiber that split."""

    def __init__(self) -> None:
        self.main = Fiber(None, [])
        self.main.state = _RUNNING
        self.current = self.main
        self.order: list[Fiber] = [self.main]

    @property
    def loops(self) -> list[Any]:
        return self.current.loops

    def split(self, sides: list[Callable[[], Any]]) -> list[Any]:
        """Run ``sides`` as fibers until all are done; their results, or the first one's error."""
        me = self.current
        kids = [Fiber(me, list(me.loops)) for _ in sides]
        at = self.order.index(me) + 1
        self.order[at:at] = kids
        me.children, me.state = kids, _JOINING
        for kid, side in zip(kids, sides):
            threading.Thread(target=self._body, args=(kid, side), daemon=True, name="iron-fiber").start()
        self._hand_over(me)
        me.children, me.state = [], _RUNNING
        if me.abort:
            raise _Aborted()
        failed = next((k.error for k in kids if k.error is not None and not isinstance(k.error, _Aborted)), None)
        if failed is not None:
            raise failed
        return [k.result for k in kids]

    def wait_until(self, ready: Callable[[], bool], stuck: Callable[[list[str]], BaseException],
                   where: str) -> None:
        """Return once ``ready()``; meanwhile other fibers run.  When none can, raise ``stuck`` (given the
        waits of the other fibers, ``where`` each)."""
        if ready():
            return
        me = self.current
        me.state, me.ready, me.stuck, me.where = _BLOCKED, ready, stuck, where
        try:
            self._hand_over(me)
            if me.abort:
                raise _Aborted()
        finally:
            me.ready = me.stuck = None
            me.state = _RUNNING

    # ------------------------------------------------------------ scheduling
    def _body(self, me: Fiber, side: Callable[[], Any]) -> None:
        me.go.acquire()
        try:
            if me.abort:
                raise _Aborted()
            me.state = _RUNNING
            me.result = side()
        except BaseException as e:  # handed to the parent, which re-raises it
            me.error = e
            if not isinstance(e, _Aborted):
                for sibling in me.parent.children if me.parent else []:
                    sibling.cancel()
        finally:
            at = self.order.index(me)
            me.state = _DONE
            self.order.remove(me)
            if not self._resume_next(at):
                # Every fiber left waits on another: the first one reports the hang.
                blocked = next(f for f in self.order if f.state == _BLOCKED)
                blocked.deadlocked = True
                self._wake(blocked)

    def _hand_over(self, me: Fiber) -> None:
        """Let other fibers run until ``me`` may go on; when none can go on and ``me`` waits, ``me`` reports the
        hang."""
        if not self._resume_next(self.order.index(me) + 1):
            assert me.stuck is not None, "a fiber joining its children always lets one run"
            raise me.stuck(self._others(me))
        me.go.acquire()
        self.current = me
        if me.deadlocked:
            me.deadlocked = False
            assert me.stuck is not None
            raise me.stuck(self._others(me))

    def _resume_next(self, start: int) -> bool:
        """Wake the first fiber from position ``start`` on (wrapping round) that can go on; False if none can."""
        n = len(self.order)
        for k in range(n):
            f = self.order[(start + k) % n]
            if f.can_go():
                self._wake(f)
                return True
        return False

    def _wake(self, f: Fiber) -> None:
        self.current = f
        f.go.release()

    def _others(self, me: Fiber) -> list[str]:
        return [f.where for f in self.order if f is not me and f.state == _BLOCKED and f.where]
