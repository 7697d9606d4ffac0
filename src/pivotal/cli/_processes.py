"""``pivotal worker --processes N``: N worker processes over one ledger, each a ``pivotal
worker`` of its own (an interpreter, and so an interpreter lock, of its own), started,
watched, restarted and stopped by this process, which runs no saga itself.

- The first process starts alone; the others start once it has (its options and the
  ledger proved good). One that exits before it started stops them all, with its status.
- A process that dies after it started is started again, after 1 s, doubling up to 30 s
  (back to 1 s once one ran a minute), until this process is told to stop.
- The processes run in sessions of their own: a stop signal reaches this process, which
  passes each on once (the first stops them claiming, the second stops their waiting). Each
  is asked to stop when this process dies, however it dies (``_children``).
- A process tells this one on its stdout that it started, then what it did, as JSON lines;
  anything else there (the app printed it) goes on to this process's stderr.

Private to ``pivotal.cli``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from types import FrameType
from typing import Any

import typer

from pivotal.cli._children import pivotal_child
from pivotal.cli._stopping import EXIT_ABANDONED, SIGNALS

log = logging.getLogger("pivotal.cli.worker")
SUPERVISED = "--supervised"  # the hidden option of a process started here
RESTART_FIRST = 1.0  # seconds before a process that died is started again, doubling ...
RESTART_MOST = 30.0  # ... up to this
STEADY = 60.0  # a process that ran this long is started again after RESTART_FIRST
LOOK = 0.05  # seconds between looks at the processes
# options this module sets for each process itself
OWN = frozenset({"processes", "supervised", "as_json", "name", "metrics_port"})
RELAYING = frozenset(
    {"relay_webhook", "relay_secret_env", "relay_allow_insecure", "relay_callable"}
)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _given(ctx: Any) -> Iterator[tuple[Any, Any]]:
    """The options of ``ctx``'s command given on its command line, with their values (the
    others come to a process as they came to this one: from the environment, or defaults)."""
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if source is not None and source.name == "COMMANDLINE":
            yield param, ctx.params[param.name]


def _said(param: Any, value: Any) -> list[str]:
    """The option ``param`` with ``value`` as a command line says it."""
    if param.is_flag:
        if value:
            return [param.opts[0]]
        return [param.secondary_opts[0]] if param.secondary_opts else []
    values = value if param.multiple else [value]
    return [
        word for v in values for word in (param.opts[0], str(v.value if isinstance(v, Enum) else v))
    ]


def process_args(ctx: typer.Context, number: int) -> list[str]:
    """The command line of process ``number`` (from 1) of the ``worker`` command ``ctx``:
    the global options and the worker's as given; ``--name NAME`` becomes ``NAME-number``,
    ``--metrics-port P`` becomes ``P + number - 1``, and only the first relays the outbox."""
    root = ctx.find_root()
    args = [
        word
        for param, value in _given(root)
        if param.name != "as_json"
        for word in _said(param, value)
    ]
    args.append(ctx.info_name or "worker")
    for param, value in _given(ctx):
        if param.name in OWN or (number > 1 and param.name in RELAYING):
            continue
        args += _said(param, value)
    if ctx.params.get("name"):
        args += ["--name", f"{ctx.params['name']}-{number}"]
    if ctx.params.get("metrics_port") is not None:
        args += ["--metrics-port", str(ctx.params["metrics_port"] + number - 1)]
    return [*args, "--processes", "1", SUPERVISED]


# -- in a process started here -------------------------------------------------------------


def say_started(owner: str) -> None:
    """Tell the process that started this one that this worker started."""
    _line({"started": owner})


def say_result(result: dict[str, Any]) -> None:
    """Tell the process that started this one what this worker did."""
    _line({"result": result})


def _line(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value, default=str) + "\n")
    sys.stdout.flush()


# -- in the process that starts them --------------------------------------------------------


@dataclass
class Process:
    """One of the N places a worker process runs in, and the process there now."""

    number: int
    args: list[str]
    child: subprocess.Popen[bytes] | None = None
    owner: str | None = None  # the worker's name, once it said it started
    results: list[dict[str, Any]] = field(default_factory=list)
    began: float = 0.0
    delay: float = RESTART_FIRST
    due: float = 0.0  # when to start the next one
    done: bool = False
    _reader: threading.Thread | None = None
    _started: threading.Event = field(default_factory=threading.Event)

    def start(self, now: float) -> None:
        self.owner, self._started = None, threading.Event()
        self.child = pivotal_child(
            self.args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True
        )
        self.began = now
        self._reader = threading.Thread(target=self._read, args=(self.child,), daemon=True)
        self._reader.start()

    def _read(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            try:
                said = json.loads(raw)
            except ValueError:  # not for this process: the app printed it; passed on
                sys.stderr.buffer.write(raw)
                sys.stderr.flush()
                continue
            if isinstance(said, dict) and isinstance(said.get("started"), str):
                self.owner = said["started"]
                self._started.set()
            elif isinstance(said, dict) and isinstance(said.get("result"), dict):
                self.results.append(said["result"])

    @property
    def started(self) -> bool:
        return self._started.is_set()

    def ended(self) -> int | None:
        """The status the process exited with, once it did and all it said was read."""
        if self.child is None or self.child.poll() is None:
            return None
        assert self._reader is not None
        assert self.child.stdout is not None
        self._reader.join()
        self.child.stdout.close()
        return self.child.returncode

    def signal(self, sig: int) -> None:
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.child.send_signal(sig)


class Supervisor:
    """Runs the processes; ``run`` returns the status this process exits with."""

    def __init__(
        self,
        args: Callable[[int], list[str]],
        count: int,
        *,
        until_idle: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.processes = [Process(n, args(n)) for n in range(1, count + 1)]
        self.until_idle = until_idle
        self.clock = clock
        self.stops = 0  # stop signals received
        self.failed: int | None = None  # the status of a process that could not start
        self.restarts = 0

    def stop(self, sig: int, frame: FrameType | None = None) -> None:
        """A stop signal: passed on once to every process running."""
        self.stops += 1
        if self.stops == 1:
            log.info(
                "stopping %d worker processes (%s)",
                len(self.processes),
                signal.Signals(sig).name,
                extra={"fields": {"event": "worker_processes_stopping", "signal": sig}},
            )
        for p in self.processes:
            p.signal(signal.SIGTERM)

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        before = {sig: signal.signal(sig, self.stop) for sig in SIGNALS}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def run(self) -> int:
        first, *rest = self.processes
        first.start(self.clock())
        while not (first.started or self._over(first)):  # its options and the ledger first
            time.sleep(LOOK)
        for p in rest:
            if not (self.stops or self.failed is not None):
                p.start(self.clock())
        while not all(p.done for p in self.processes):
            for p in self.processes:
                if p.child is not None:
                    self._over(p)
                elif self.stops or self.failed is not None:
                    p.done = True
                elif not p.done and self.clock() >= p.due:
                    p.start(self.clock())
                    self.restarts += 1
                    if self.stops:  # a signal that came while it started
                        p.signal(signal.SIGTERM)
            time.sleep(LOOK)
        return self.status()

    def _over(self, p: Process) -> bool:
        """Whether ``p``'s process is over, and what follows from it if so."""
        status = p.ended()
        if status is None:
            return False
        started, p.child = p.started, None
        now = self.clock()
        if started and status not in (0, EXIT_ABANDONED):  # it said nothing of what it did
            p.results.append({"worker": p.owner, "exit": status})
        if self.stops or self.failed is not None:
            p.done = True
        elif not started:
            self.failed = status or 1
            p.done = True
            log.error(
                "worker process %d exited with status %d before it started; stopping the others",
                p.number,
                status,
                extra={"fields": {"event": "worker_process_failed", "status": status}},
            )
            for other in self.processes:
                other.signal(signal.SIGTERM)
        elif self.until_idle and status == 0:
            p.done = True
        else:
            p.delay = RESTART_FIRST if now - p.began >= STEADY else p.delay
            p.due = now + p.delay
            log.warning(
                "worker process %d (%s) exited with status %d; starting another in %gs",
                p.number,
                p.owner,
                status,
                p.delay,
                extra={
                    "fields": {
                        "event": "worker_process_exited",
                        "worker": p.owner,
                        "status": status,
                        "restart_in": p.delay,
                    }
                },
            )
            p.delay = min(p.delay * 2, RESTART_MOST)
        return True

    def status(self) -> int:
        if self.failed is not None:
            return self.failed
        if any("abandoned" in r for r in self.results()):
            return EXIT_ABANDONED
        last = [p.results[-1] for p in self.processes if p.results]
        return 1 if any("exit" in r for r in last) else 0

    def results(self) -> list[dict[str, Any]]:
        return [r for p in self.processes for r in p.results]
