"""The pytest plugin: the ``pivotal_chaos`` fixture and a summary table at the end.

Installing Pivotal registers it (entry point ``pytest11``). ``explore`` is a coroutine:
``await`` it in an async test (``pip install "pivotal[testing]"`` brings pytest-asyncio) or
run it with ``asyncio.run(...)`` in a plain one; ``explore_killed`` is a plain function and
belongs in a plain test. A test that calls ``explore`` and never runs it fails, rather than
passing without having explored anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

import pytest

from pivotal.testing.chaos import ChaosScenario, LedgerFactory, RunResult, World, memory_ledger
from pivotal.testing.report import Chaos, ChaosReport

_REPORT = pytest.StashKey[ChaosReport]()
_WORKER_KEY = "pivotal_chaos_report"
W = TypeVar("W", bound=World)


class ChaosFixture(Chaos):
    """``Chaos`` for one test; it remembers each ``explore`` so that one never awaited is
    reported at the end of the test."""

    def __init__(self, report: ChaosReport | None = None) -> None:
        super().__init__(report)
        self._explorations: list[Coroutine[Any, Any, list[RunResult]]] = []

    def explore(
        self,
        make_world: Callable[[], W],
        scenarios: Iterable[ChaosScenario[W]],
        *,
        ledger: LedgerFactory = memory_ledger,
        mode: str = "in-process",
    ) -> Coroutine[Any, Any, list[RunResult]]:
        exploration = super().explore(make_world, scenarios, ledger=ledger, mode=mode)
        self._explorations.append(exploration)
        return exploration

    def never_run(self) -> int:
        """How many ``explore`` calls were never awaited (they are closed now)."""
        forgotten = 0
        for exploration in self._explorations:
            if inspect.getcoroutinestate(exploration) == inspect.CORO_CREATED:
                exploration.close()
                forgotten += 1
        return forgotten


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPORT] = ChaosReport()


@pytest.fixture
def pivotal_chaos(request: pytest.FixtureRequest) -> Iterator[Chaos]:
    """Explore crash sites of your scenarios; results go to the session summary."""
    chaos = ChaosFixture(request.config.stash[_REPORT])
    yield chaos
    if chaos.never_run():
        pytest.fail(
            "pivotal_chaos.explore(...) was called but never run, so nothing was explored: "
            "await it in an async test, or run it with asyncio.run(...) in a plain one",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the worker's report to the controller."""
    sent = getattr(session.config, "workeroutput", None)
    report = session.config.stash.get(_REPORT, None)
    if sent is not None and report is not None:
        sent[_WORKER_KEY] = report.dump()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """In pytest-xdist's controller: add a worker's report to the session's."""
    data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if data is not None:
        node.config.stash[_REPORT].merge(data)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    report = terminalreporter.config.stash.get(_REPORT, None)
    if report is None or not report.cells:
        return
    terminalreporter.write_sep("=", "pivotal chaos summary")
    terminalreporter.write(report.render(width=max(120, terminalreporter._tw.fullwidth)))
