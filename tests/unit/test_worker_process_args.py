"""The command line each process of `pivotal worker --processes N` gets: the options given
on this one's (not those from the environment or defaults), each process's own name and
metrics port, and the outbox relayed by the first alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from pivotal.cli import _processes, cli

TAIL = ["--processes", "1", "--supervised"]


class Seen:
    """In place of the supervisor: the command line of each process, and nothing run."""

    lines: ClassVar[list[list[str]]] = []

    def __init__(self, args: Callable[[int], list[str]], count: int, **_: Any) -> None:
        Seen.lines = [args(n) for n in range(1, count + 1)]
        self.restarts = 0

    def handling(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()

    def run(self) -> int:
        return 0

    def results(self) -> list[dict[str, Any]]:
        return []


def lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: list[str]) -> list[list[str]]:
    monkeypatch.setattr(_processes, "Supervisor", Seen)
    (tmp_path / "l.db").touch()
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, given)
    assert done.exit_code == 0, done.output
    return Seen.lines


def options(args: list[str]) -> tuple[list[str], list[tuple[str, ...]]]:
    """The global options in order, then the worker's as a sorted list of (option, value)
    pairs (their order on a command line means nothing); the tail checked apart."""
    assert args[-3:] == TAIL
    at = args.index("worker")
    pairs, rest = [], args[at + 1 : -3]
    while rest:
        if len(rest) > 1 and not rest[1].startswith("--"):
            pairs.append((rest[0], rest[1]))
            rest = rest[2:]
        else:
            pairs.append((rest[0],))
            rest = rest[1:]
    return args[: at + 1], sorted(pairs)


DB = ["--db", "sqlite:///l.db"]


@pytest.mark.parametrize(
    ("given", "number", "expected"),
    [
        ([*DB, "worker", "--processes", "2"], 1, [*DB, "worker"]),
        (
            [*DB, "--app", "m:a", "worker", "--processes", "2", "--until-idle", "--poll", "0.1"],
            2,
            [*DB, "--app", "m:a", "worker", "--poll", "0.1", "--until-idle"],
        ),
        (
            [*DB, "--example-app", "worker", "--processes", "3", "--name", "w"],
            3,
            [*DB, "--example-app", "worker", "--name", "w-3"],
        ),
        (
            [*DB, "worker", "--processes", "2", "--metrics-port", "9464"],
            2,
            [*DB, "worker", "--metrics-port", "9465"],
        ),
        (
            [*DB, "worker", "--processes", "2", "--log-format", "json", "--json"],
            1,
            [*DB, "worker", "--log-format", "json"],
        ),
        ([*DB, "--json", "worker", "--processes", "2"], 2, [*DB, "worker"]),
        (
            [*DB, "worker", "--processes", "4", "--concurrency", "16"],
            4,
            [*DB, "worker", "--concurrency", "16"],
        ),
        (
            [
                *DB,
                "worker",
                "--processes",
                "2",
                "--relay-callable",
                "a:b",
                "--relay-callable",
                "c:d",
            ],
            1,
            [*DB, "worker", "--relay-callable", "a:b", "--relay-callable", "c:d"],
        ),
        (
            [
                *DB,
                "worker",
                "--processes",
                "2",
                "--relay-callable",
                "a:b",
                "--relay-allow-insecure",
            ],
            2,
            [*DB, "worker"],
        ),
        (
            [*DB, "worker", "--processes", "2", "--migrate", "--create"],
            2,
            [*DB, "worker", "--migrate", "--create"],
        ),
    ],
)
def test_each_process_gets_the_options_given(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    given: list[str],
    number: int,
    expected: list[str],
) -> None:
    got = lines(tmp_path, monkeypatch, given)[number - 1]
    assert options(got) == options([*expected, *TAIL])


def test_options_from_the_environment_stay_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger URL from PIVOTAL_DATABASE_URL (it may hold a password) reaches a process
    through its environment, never on its command line, where any user can read it; so
    does the number of processes."""
    monkeypatch.setenv("PIVOTAL_DATABASE_URL", f"sqlite:///{tmp_path / 'l.db'}")
    monkeypatch.setenv("PIVOTAL_WORKER_PROCESSES", "3")
    got = lines(tmp_path, monkeypatch, ["worker", "--poll", "0.2"])
    assert got == [["worker", "--poll", "0.2", *TAIL]] * 3
