"""``ProjectRunner``: the CLI's side of the runner process (``python -m iron.runner``).

It spawns the runner, reads its stdout line by line as protocol messages, hands each row to a
callback and watches every item with a timeout.  When the child crashes, hangs past the timeout
or exits early, the item it was running becomes a failed row that says why, and a fresh child
carries on with the items left (``--skip`` of everything already reported).  A crash while the
runner prepared later items ahead on worker threads could belong to one of those, so the item is
first retried in a child that prepares nothing ahead, and fails only if it crashes there too.
The CLI itself imports no user code and touches no device; nothing in the project is written.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import config
from ..core import protocol
from ..core.errors import IronError

Row = protocol.TestRow | protocol.BenchRow


class RunnerFailed(IronError):
    """The runner could not get as far as a plan (an unusable backend, a project it cannot load)."""


@dataclass
class RunResult:
    command: str
    hello: dict[str, Any] = field(default_factory=dict)
    plan: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    #: Failures outside any row (a module that did not import), in the order reported.
    errors: list[str] = field(default_factory=list)
    #: Fresh runners started after a crash, a hang or an early exit.
    restarts: int = 0
    #: Whether a runner sent its plan (the first plan is the run's; later runners send what is left).
    planned: bool = False

    @property
    def device(self) -> str:
        return str(self.hello.get("device") or self.hello.get("backend") or "unknown device")

    @property
    def backend(self) -> str:
        return str(self.hello.get("backend") or "")

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(not r.ok for r in self.rows)


@dataclass
class _Attempt:
    status: str = "running"  # "done", "timeout", "exited"
    current: str | None = None
    done: bool = False
    #: Whether this child has sent its plan (until then it imports, opens the device: a longer limit).
    planned: bool = False
    returncode: int | None = None
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=30))


#: Above this many ``--skip`` ids the arguments go through an ``@file``.
_INLINE_SKIPS = 50
#: Seconds a child may take to start (import the project, open the device) whatever the item timeout.
STARTUP_SECONDS = 60.0


class ProjectRunner:
    """Run ``command`` ("test" or "bench") with runner ``args`` until every planned item has a row."""

    def __init__(self, command: str, args: Sequence[str] = (), *, on_row: Callable[[Row], None] | None = None,
                 on_start: Callable[[str], None] | None = None, on_plan: Callable[[list[str]], None] | None = None,
                 on_log: Callable[[str], None] | None = None, timeout: float | None = None,
                 cwd: str | Path | None = None, python: str | None = None):
        self.command = command
        self.args = list(args)
        self.on_row, self.on_start, self.on_plan, self.on_log = on_row, on_start, on_plan, on_log
        self.timeout = float(config.get("runner_timeout") if timeout is None else timeout)
        self.cwd = cwd
        self.python = python or sys.executable
        #: The run so far (what ``run`` returns at the end): the hello, the plan, the rows that arrived.
        self.result = RunResult(command)

    def run(self) -> RunResult:
        result = self.result = RunResult(self.command)
        finished: set[str] = set()
        meta: dict[str, dict[str, Any]] = {}
        serial = False
        while True:
            attempt = self._attempt(result, finished, meta, serial)
            if attempt.status == "done":
                return result
            if not result.planned:
                raise RunnerFailed(f"the runner stopped before planning anything ({self._how(attempt)})"
                                   + _tail(attempt.stderr))
            item = attempt.current or next((i for i in result.plan if i not in finished), None)
            if item is None:
                return result  # everything reported; only the final message was lost
            if attempt.status == "exited" and not serial and int(result.hello.get("lookahead") or 0) > 0:
                serial = True  # the crash may belong to an item prepared ahead: retry this one alone
                result.restarts += 1
                continue
            reason = self._reason(attempt)
            row = self._failed_row(item, meta.get(item, {}), result.backend, reason)
            finished.add(item)
            result.rows.append(row)
            if self.on_row:
                self.on_row(row)
            result.restarts += 1

    # ------------------------------------------------------------ one child
    def _attempt(self, result: RunResult, finished: set[str], meta: dict[str, dict[str, Any]],
                 serial: bool) -> _Attempt:
        attempt = _Attempt()
        extra = [a for i in sorted(finished) for a in ("--skip", i)] + (["--lookahead", "0"] if serial else [])
        argfile = None
        if len(finished) > _INLINE_SKIPS:
            with tempfile.NamedTemporaryFile("w", suffix=".args", prefix="iron-runner-", delete=False) as f:
                f.write("\n".join(extra) + "\n")
                argfile = f.name
            extra = [f"@{argfile}"]
        cmd = [self.python, "-m", "iron.runner", self.command, *self.args, *extra]
        src = str(Path(__file__).resolve().parents[2])  # the same Iron in the child as here
        env = config.child_environment({"PYTHONPATH": src})
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    text=True, encoding="utf-8", errors="replace", bufsize=1, cwd=self.cwd,
                                    env=env, start_new_session=True)
        except OSError as e:
            raise RunnerFailed(f"cannot start the runner ({self.python}): {e}") from None
        events: queue.Queue[tuple[str, str | None]] = queue.Queue()
        readers = [threading.Thread(target=_pump, args=(proc.stdout, events, "out"), daemon=True),
                   threading.Thread(target=_pump, args=(proc.stderr, events, "err"), daemon=True)]
        for t in readers:
            t.start()
        open_streams = 2
        deadline = time.monotonic() + max(self.timeout, STARTUP_SECONDS)
        try:
            while open_streams:
                try:
                    kind, line = events.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    attempt.status = "timeout"
                    _kill(proc)
                    break
                if line is None:
                    open_streams -= 1
                elif kind == "err":
                    attempt.stderr.append(line.rstrip("\n"))
                    if self.on_log:
                        self.on_log(line.rstrip("\n"))
                elif self._message(line, result, attempt, finished, meta):
                    limit = self.timeout if attempt.planned else max(self.timeout, STARTUP_SECONDS)
                    deadline = time.monotonic() + limit
            attempt.returncode = proc.wait()
        finally:
            if proc.poll() is None:
                _kill(proc)
                proc.wait()
            if argfile:
                os.unlink(argfile)
        if attempt.status == "running":
            attempt.status = "done" if attempt.done and attempt.current is None else "exited"
        return attempt

    def _message(self, line: str, result: RunResult, attempt: _Attempt, finished: set[str],
                 meta: dict[str, dict[str, Any]]) -> bool:
        """Handle one stdout line; True when it was a protocol message (the watchdog restarts)."""
        try:
            msg = protocol.decode(line)
        except protocol.ProtocolError as e:
            if "speaks protocol" in str(e):
                raise
            attempt.stderr.append(line.rstrip("\n"))
            return False
        data = msg.data
        if msg.kind == "hello":
            result.hello.update(data)
        elif msg.kind == "plan":
            attempt.planned = True
            if not result.planned:
                result.plan = list(data.get("items", []))
                meta.update(zip(result.plan, data.get("meta") or [{} for _ in result.plan]))
                result.planned = True
                if self.on_plan:
                    self.on_plan(result.plan)
        elif msg.kind == "start":
            attempt.current = str(data.get("item"))
            if self.on_start:
                self.on_start(attempt.current)
        elif msg.kind in ("test_row", "bench_row"):
            row = protocol.test_row(data) if msg.kind == "test_row" else protocol.bench_row(data)
            if attempt.current is not None:
                finished.add(attempt.current)
            attempt.current = None
            result.rows.append(row)
            if self.on_row:
                self.on_row(row)
        elif msg.kind == "error":
            result.errors.append(str(data.get("message")))
        elif msg.kind == "log" and self.on_log:
            self.on_log(str(data.get("text")))
        elif msg.kind == "done":
            attempt.done = True
        return True

    def _how(self, attempt: _Attempt) -> str:
        if attempt.status == "timeout":
            limit = self.timeout if attempt.planned else max(self.timeout, STARTUP_SECONDS)
            return f"no answer for {limit:g} s; stopped"
        rc = attempt.returncode
        if rc is not None and rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit status {rc}"

    def _reason(self, attempt: _Attempt) -> str:
        if attempt.status == "timeout":
            return (f"timed out: no result within {self.timeout:g} s (runner_timeout); the runner was stopped and "
                    "the remaining items ran in a fresh one")
        return f"the runner crashed while running this item ({self._how(attempt)})" + _tail(attempt.stderr, 5)

    def _failed_row(self, item: str, meta: dict[str, Any], backend: str, reason: str) -> Row:
        name = str(meta.get("name") or item.split("[")[0])
        common = dict(kernel=str(meta.get("kernel", "")), dtype=str(meta.get("dtype", "-")), backend=backend,
                      ok=False, error=reason)
        if self.command == "bench":
            return protocol.BenchRow(bench=name, shape=str(meta.get("case", item)), **common)
        return protocol.TestRow(test=name, case=str(meta.get("case", item)), **common)


def _pump(stream: Any, events: queue.Queue, kind: str) -> None:
    for line in stream:
        events.put((kind, line))
    events.put((kind, None))


def _kill(proc: subprocess.Popen) -> None:
    """Stop the runner and anything it started (it leads its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


def _tail(lines: Sequence[str], n: int = 15) -> str:
    shown = [ln for ln in list(lines)[-n:] if ln.strip()]
    return (":\n    " + "\n    ".join(shown)) if shown else ""


__all__ = ["ProjectRunner", "RunResult", "RunnerFailed"]


# ---------------------------------------------------------------- what `iron test` and `iron bench` share
def add_run_arguments(p: Any) -> None:
    """The options ``iron test`` and ``iron bench`` both take."""
    p.add_argument("--filter", action="append", default=[], metavar="TEXT",
                   help="only items whose name, case or kernel contains TEXT (repeatable)")
    p.add_argument("--backend", default=None, help="interp, vulkan, cuda, ... or auto (default: the backend option)")
    p.add_argument("--dtype", action="append", default=[], metavar="DTYPE",
                   help="only these dtypes (repeatable or comma-separated: f32,f16)")
    p.add_argument("-m", "--module", action="append", default=[], metavar="SOURCE",
                   help="a FILE.py or MODULE to load (repeatable; default: the modules iron.toml lists)")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON document on stdout")
    p.add_argument("--seed", type=int, default=None, help="base seed of the random inputs (default: a fresh one)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="per-item limit before a row fails as hung (default: the runner_timeout option)")


def runner_arguments(ns: Any, seed: int) -> list[str]:
    """The runner's command line for the parsed ``iron test`` / ``iron bench`` options."""
    out: list[str] = ["--seed", str(seed)]
    for m in ns.module:
        out += ["-m", str(Path(m).resolve()) if m.endswith(".py") else m]
    for f in ns.filter:
        out += ["--filter", f]
    for d in ns.dtype:
        out += ["--dtype", d]
    if ns.backend:
        out += ["--backend", ns.backend]
    return out
