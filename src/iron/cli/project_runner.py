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

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
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
    #: Wall time of the whole run, restarted runners included (the summary's time).
    seconds: float = 0.0

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
    #: When ``current`` started (``time.monotonic``), for the time a hung or crashed item cost.
    current_since: float = 0.0
    done: bool = False
    #: Whether this child has sent its plan (until then it imports, opens the device: a longer limit).
    planned: bool = False
    returncode: int | None = None
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=30))


#: Above this many ``--skip`` ids they go through a file (``--skip-from``).
_INLINE_SKIPS = 50
#: Seconds a child may take to start (import the project, open the device) whatever the item timeout.
STARTUP_SECONDS = 60.0
#: Seconds a runner that said it was done may take to exit (release the device) before it is stopped.
EXIT_SECONDS = 10.0
#: Seconds to read what is left in the pipes once the runner has exited (a pipe open longer is held by a process
#: it left behind, which is then stopped with the runner's process group).
DRAIN_SECONDS = 1.0
#: How often the runner is checked for having exited while its pipes are quiet.
POLL_SECONDS = 0.2


class ProjectRunner:
    """Run ``command`` ("test" or "bench") with runner ``args`` until every planned item has a row."""

    def __init__(self, command: str, args: Sequence[str] = (), *, on_row: Callable[[Row], None] | None = None,
                 on_start: Callable[[str], None] | None = None, on_plan: Callable[[list[str]], None] | None = None,
                 on_log: Callable[[str], None] | None = None, timeout: float | None = None,
                 cwd: str | Path | None = None, python: str | None = None):
        self.command = command
        self.args = list(args)
        self.on_row, self.on_start, self.on_plan, self.on_log = on_row, on_start, on_plan, on_log
        self.timeout = float(config.get("runner_timeout") if timeout is None
                             else config.parse_value("runner_timeout", timeout, "the runner timeout"))
        self.cwd = cwd
        self.python = python or sys.executable
        #: The run so far (what ``run`` returns at the end): the hello, the plan, the rows that arrived.
        self.result = RunResult(command)

    def run(self) -> RunResult:
        result = self.result = RunResult(self.command)
        started = time.monotonic()
        try:
            return self._run(result)
        finally:
            result.seconds = time.monotonic() - started

    def _run(self, result: RunResult) -> RunResult:
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
            seconds = time.monotonic() - attempt.current_since if attempt.current == item else None
            row = self._failed_row(item, meta.get(item, {}), result.backend, reason, seconds)
            finished.add(item)
            result.rows.append(row)
            if self.on_row:
                self.on_row(row)
            result.restarts += 1

    # ------------------------------------------------------------ one child
    def _attempt(self, result: RunResult, finished: set[str], meta: dict[str, dict[str, Any]],
                 serial: bool) -> _Attempt:
        attempt = _Attempt()
        extra = ["--lookahead=0"] if serial else []
        argfile = None
        if len(finished) > _INLINE_SKIPS:
            with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="iron-runner-skip-", delete=False,
                                             encoding="utf-8") as f:
                json.dump(sorted(finished), f)
                argfile = f.name
            extra.append(f"--skip-from={argfile}")
        else:
            extra += [f"--skip={i}" for i in sorted(finished)]
        cmd = [self.python, "-m", "iron.runner", self.command, *self.args, *extra]
        src = str(Path(__file__).resolve().parents[2])  # the same Iron in the child as here
        env = config.child_environment({"PYTHONPATH": src})
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    bufsize=0, cwd=self.cwd, env=env, start_new_session=True)
        except OSError as e:
            raise RunnerFailed(f"cannot start the runner ({self.python}): {e}") from None
        pipes = _Pipes(proc)
        deadline = time.monotonic() + max(self.timeout, STARTUP_SECONDS)
        done_at: float | None = None  # when the runner said it was done
        exited_at: float | None = None  # when the runner was seen to have exited
        try:
            while True:
                now = time.monotonic()
                if exited_at is None and _has_exited(proc):
                    exited_at = now
                if done_at is None and attempt.done:
                    done_at = now
                if exited_at is not None and not pipes.open:
                    break
                # Once the runner has exited, what it wrote is in the pipes already: a pipe still open past a short
                # drain is held by a process it left behind, whose end of it nobody should wait for.
                if exited_at is not None:
                    limit = exited_at + DRAIN_SECONDS
                elif done_at is not None:
                    limit = min(deadline, done_at + EXIT_SECONDS)
                else:
                    limit = deadline
                if now >= limit:
                    if exited_at is None and done_at is None:
                        attempt.status = "timeout"
                    break
                # (both pipes at their end: the runner is exiting, soon seen as exited)
                for kind, line in pipes.read(min(limit - now, POLL_SECONDS if pipes.open else 0.01)):
                    if kind == "err":
                        attempt.stderr.append(line)
                        if self.on_log:
                            self.on_log(line)
                    elif self._message(line, result, attempt, finished, meta):
                        allowed = self.timeout if attempt.planned else max(self.timeout, STARTUP_SECONDS)
                        deadline = time.monotonic() + allowed
        finally:
            _kill(proc)  # a hung runner, and whatever it left running (its process group), before it is reaped
            attempt.returncode = proc.wait()
            pipes.close()
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
            attempt.current_since = time.monotonic()
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

    def _failed_row(self, item: str, meta: dict[str, Any], backend: str, reason: str,
                    seconds: float | None = None) -> Row:
        name = str(meta.get("name") or item.split("[")[0])
        common = dict(kernel=str(meta.get("kernel", "")), dtype=str(meta.get("dtype", "-")), backend=backend,
                      ok=False, error=reason)
        if self.command == "bench":
            return protocol.BenchRow(bench=name, shape=str(meta.get("case", item)), **common)
        return protocol.TestRow(test=name, case=str(meta.get("case", item)), seconds=seconds, **common)


class _Pipes:
    """The runner's stdout and stderr as lines, read without blocking.

    Reading is never tied to the end of a pipe: a process the runner started (a test's setup) may hold a copy of
    it open long after the runner is gone, so the caller decides when to stop and :meth:`close` drops the rest.
    """

    def __init__(self, proc: subprocess.Popen) -> None:
        self._selector = selectors.DefaultSelector()
        self._partial: dict[str, bytes] = {}
        for kind, stream in (("out", proc.stdout), ("err", proc.stderr)):
            os.set_blocking(stream.fileno(), False)
            self._selector.register(stream, selectors.EVENT_READ, kind)
            self._partial[kind] = b""

    @property
    def open(self) -> int:
        """How many of the two pipes have not reached their end."""
        return len(self._selector.get_map())

    def read(self, timeout: float) -> list[tuple[str, str]]:
        """The complete lines (``("out" | "err", text)``, no newline) that arrive within ``timeout`` seconds."""
        lines: list[tuple[str, str]] = []
        for key, _ in self._selector.select(max(0.0, timeout)):
            kind = key.data
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:  # the end of the pipe: a last line without its newline still counts
                tail, self._partial[kind] = self._partial[kind], b""
                if tail:
                    lines.append((kind, _text(tail)))
                self._selector.unregister(key.fileobj)
                key.fileobj.close()
                continue
            *whole, self._partial[kind] = (self._partial[kind] + chunk).split(b"\n")
            lines += [(kind, _text(ln)) for ln in whole]
        return lines

    def close(self) -> None:
        for key in list(self._selector.get_map().values()):
            self._selector.unregister(key.fileobj)
            key.fileobj.close()
        self._selector.close()


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r")


def _has_exited(proc: subprocess.Popen) -> bool:
    """Whether the runner has exited, without reaping it: until it is reaped its pid, the id of its process group,
    cannot be reused, so killing that group afterwards reaches only what the runner left behind."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError):  # no waitid here
        return proc.poll() is not None


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
    p.add_argument("--timeout", type=_timeout, default=None, metavar="SECONDS",
                   help="per-item limit before a row fails as hung (default: the runner_timeout option)")


def runner_arguments(ns: Any, seed: int) -> list[str]:
    """The runner's command line for the parsed ``iron test`` / ``iron bench`` options."""
    # Each value is attached to its flag (``--filter=@x``, ``--filter=-x``) so that none can be read as a flag.
    out: list[str] = [f"--seed={seed}"]
    out += [f"--module={Path(m).resolve() if m.endswith('.py') else m}" for m in ns.module]
    out += [f"--filter={f}" for f in ns.filter]
    out += [f"--dtype={d}" for d in ns.dtype]
    if ns.backend:
        out.append(f"--backend={ns.backend}")
    return out


def _timeout(text: str) -> float:
    """``--timeout``, checked as the runner_timeout option is (a finite number of seconds above 0)."""
    try:
        return float(config.parse_value("runner_timeout", text, "--timeout"))
    except IronError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--timeout: ")) from None
