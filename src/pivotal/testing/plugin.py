"""The pytest plugin: the ``pivotal_chaos`` fixture and a summary table at the end."""

from __future__ import annotations

import pytest

from pivotal.testing.report import Chaos, ChaosReport

_REPORT = pytest.StashKey[ChaosReport]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPORT] = ChaosReport()


@pytest.fixture
def pivotal_chaos(request: pytest.FixtureRequest) -> Chaos:
    """Explore crash sites of your scenarios; results go to the session summary."""
    return Chaos(request.config.stash[_REPORT])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    report = terminalreporter.config.stash.get(_REPORT, None)
    if report is None or not report.cells:
        return
    terminalreporter.write_sep("=", "pivotal chaos summary")
    terminalreporter.write(report.render(width=max(120, terminalreporter._tw.fullwidth)))
