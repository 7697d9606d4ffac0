"""An operator acts on every saga a search selects from the command line (in this process):
``sagas bulk abort|rerun|retry-dead-letters`` with the filters of ``sagas list``;
``--dry-run`` changes nothing, and acting asks a terminal to confirm (or needs --yes)."""

from __future__ import annotations

import json

import pytest
from cli_harness import InProcess, commands
from test_cli import checkout

from pivotal.cli import bulk as bulk_cli
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.orchestration.rerun import rerun_id
from pivotal.store.search import FIELDS

SUBMITTED = ["--status", "submitted", "--order", "asc"]


def three_submitted_one_done(inproc: InProcess) -> None:
    for n, saga in enumerate(("s1", "s2", "s3"), start=1):
        inproc.ok("submit", inproc.plan(f"{saga}.json", checkout(f"order-{n}")), "--saga-id", saga)
    inproc("execute", inproc.plan("d.json", checkout("order-4")), "--saga-id", "done")


def statuses(inproc: InProcess) -> dict[str, str]:
    return {s["saga_id"]: s["status"] for s in inproc.json("sagas", "list")}


def test_a_dry_run_shows_the_count_and_the_ids_and_changes_nothing(inproc: InProcess) -> None:
    three_submitted_one_done(inproc)
    before = statuses(inproc)
    shown = inproc.ok("sagas", "bulk", "abort", "--dry-run", *SUBMITTED)  # no --by needed
    assert shown.splitlines() == ["Abort 3 sagas? (a dry run)", "s1", "s2", "s3"]
    found = inproc.json("sagas", "bulk", "abort", "--by", "ops", "--dry-run", *SUBMITTED)
    assert found == {"act": "abort", "count": 3, "saga_ids": ["s1", "s2", "s3"]}
    assert statuses(inproc) == before


def test_abort_for_real_records_each_saga_and_says_what_became_of_each(
    inproc: InProcess,
) -> None:
    three_submitted_one_done(inproc)
    why = ["--by", "ops", "--reason", "a bad batch", "--yes"]
    filters = ["--catalogue", "checkout", "--order", "asc", "--json"]
    reply = inproc("sagas", "bulk", "abort", *why, *filters)
    assert reply.exit_code == 1, reply.stderr  # one was refused
    done = json.loads(reply.stdout)
    assert done["count"] == 4
    assert done["counts"] == {"acted": 3, "already": 0, "refused": 1, "not_found": 0}
    [refused] = [r for r in done["sagas"] if r["outcome"] == "refused"]
    assert (refused["saga_id"], refused["code"]) == ("done", "saga_not_abortable")
    for saga in ("s1", "s2", "s3"):
        shown = inproc.json("sagas", "show", saga)
        assert (shown["status"], shown["reason"]) == ("compensating", "aborted by ops: a bad batch")
    again = inproc("sagas", "bulk", "abort", *why, "--status", "compensating")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "0 acted, 3 already, 0 refused, 0 not found"


def test_off_a_terminal_acting_needs_yes_and_on_one_it_asks(
    inproc: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    three_submitted_one_done(inproc)
    why = ["--by", "ops", "--reason", "a bad batch", *SUBMITTED]
    refused = inproc("sagas", "bulk", "abort", *why)
    assert refused.exit_code == 2
    assert "error [confirmation_required]: abort would act on 3 sagas: give --yes" in (
        refused.stderr
    )
    monkeypatch.setattr(bulk_cli, "on_terminal", lambda: True)
    declined = inproc("sagas", "bulk", "abort", *why, input=b"n\n")
    assert "Abort 3 sagas? [y/N]" in declined.stdout
    assert declined.exit_code == 1
    assert set(statuses(inproc).values()) == {"submitted", "completed"}
    accepted = inproc("sagas", "bulk", "abort", *why, input=b"y\n")
    assert accepted.exit_code == 0, accepted.stderr
    assert statuses(inproc) == {
        "s1": "compensating",
        "s2": "compensating",
        "s3": "compensating",
        "done": "completed",
    }


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["abort", "--by", "ops", "--reason", " ", "--yes"], "invalid_input"),
        (["abort", "--by", " ", "--reason", "why", "--yes"], "invalid_input"),
        (["abort", "--reason", "why", "--status", "submitted", "--yes"], "invalid_input"),
        (["cancel", "--by", "ops", "--yes"], "invalid_input"),
        (["abort", "--by", "ops", "--reason", "why", "--yes"], "invalid_input"),  # no filter
        (["abort", "--by", "ops", "--reason", "why", "--status", "no", "--yes"], "invalid_filter"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    inproc: InProcess, args: list[str], code: str
) -> None:
    three_submitted_one_done(inproc)
    before = statuses(inproc)
    done = inproc("sagas", "bulk", *args)
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert f"error [{code}]" in done.stderr
    assert statuses(inproc) == before


def test_rerun_and_retry_dead_letters_by_filter(inproc: InProcess) -> None:
    services = CommerceServices(inproc.tmp / "commerce.db")
    services.faults.next("charge", Fault.PERMANENT)
    services.close()
    inproc("execute", inproc.plan("c.json", checkout("order-3")), "--saga-id", "c")
    rerun = inproc.json(
        "sagas",
        "bulk",
        "rerun",
        "--by",
        "ops",
        "--reason",
        "card fixed",
        "--status",
        "compensated",
        "--yes",
    )
    assert rerun["sagas"] == [
        {"saga_id": "c", "outcome": "acted", "code": None, "message": None, "rerun": rerun_id("c")}
    ]
    again = inproc.json("sagas", "show", rerun_id("c"))  # who asked and why, on the new saga
    assert again["provenance"]["rerun_of"] == {
        "saga_id": "c",
        "by": "ops",
        "reason": "card fixed",
    }
    services = CommerceServices(inproc.tmp / "commerce.db")
    services.faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    services.close()
    inproc("execute", inproc.plan("f.json", checkout("order-4")), "--saga-id", "f")
    assert statuses(inproc)["f"] == "compensation_failed"
    services = CommerceServices(inproc.tmp / "commerce.db")
    services.faults.clear()
    services.close()
    failed = ["--status", "compensation_failed", "--yes"]
    retried = inproc.json("sagas", "bulk", "retry-dead-letters", "--by", "ops", *failed)
    assert retried["counts"] == {"acted": 1, "already": 0, "refused": 0, "not_found": 0}
    assert inproc.json("dead-letters", "list")  # due now: a worker's sweep retries it
    inproc.ok("sweep")
    assert inproc.json("dead-letters", "list") == []


def _filter_options(path: tuple[str, ...]) -> dict[str, tuple[object, ...]]:
    """The options of a command that feed its search (``store.search.FIELDS``), each as its
    spelling on the command line, whether it repeats, its default and its help."""
    [command] = [c for p, c in commands() if p == path]
    return {
        p.name: (tuple(p.opts), p.multiple, p.default, getattr(p, "help", None))
        for p in command.params
        if p.name in FIELDS
    }


def test_sagas_list_and_sagas_bulk_take_the_same_filters() -> None:
    listed, acted = _filter_options(("sagas", "list")), _filter_options(("sagas", "bulk"))
    assert list(listed) == list(FIELDS)  # every filter of the search, in its order
    assert listed == acted
    assert listed["reason"][0] == ("--reason-holds",)  # --reason is what a person records


def test_a_message_of_several_lines_is_shown_on_lines_of_its_own() -> None:
    from pivotal.cli.bulk import shown
    from pivotal.operations.bulk import Outcome, Result

    message = "the plan no longer validates:\n[invalid_args] steps[0]: bad\n\x1b[31mred"
    said = shown(Result("s-1", Outcome.REFUSED, "plan_rejected", message))

    assert said.splitlines() == [
        "s-1: refused [plan_rejected] the plan no longer validates:",
        "    [invalid_args] steps[0]: bad",
        "    \\x1b[31mred",
    ]
    assert "\\n" not in said
