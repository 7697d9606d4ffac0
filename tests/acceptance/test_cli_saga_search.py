"""``pivotal sagas list`` searches: every filter of ``store.search`` as an option, pages by
``--cursor`` (``next_cursor`` with ``--json --paged``), and a bad filter is a clear error."""

from __future__ import annotations

import asyncio
import json

import pytest
from cli_harness import InProcess

from pivotal import SagaStatus
from pivotal.store import SQLiteStore
from search_ledger import NOW, make, six


def fill(inproc: InProcess, count: int = 0) -> None:
    """The six sagas of ``search_ledger.six``, or ``count`` completed ones a second apart."""

    async def work() -> None:
        async with SQLiteStore(inproc.ledger) as store:
            if count:
                for n in range(count):
                    await make(store, f"s{n}", at=NOW + n, status=SagaStatus.COMPLETED)
            else:
                await six(store)

    asyncio.run(work())


def ids(inproc: InProcess, *args: str) -> list[str]:
    return [s["saga_id"] for s in inproc.json("sagas", "list", *args)]


def test_every_filter_as_an_option(inproc: InProcess) -> None:
    fill(inproc)
    assert ids(inproc) == ["f", "e", "d", "c", "b", "a"]
    assert ids(inproc, "--status", "compensated", "--status", "needs_human") == ["e", "c", "b"]
    assert ids(inproc, "--status", "running,awaiting_approval") == ["f", "d"]
    assert ids(inproc, "--catalogue", "fulfilment") == ["e", "c"]
    since, until = "2027-01-10T08:00:00Z", "2027-01-11T08:00:00Z"  # NOW less 5 and 4 days
    assert ids(inproc, "--created-since", since, "--created-until", until) == ["c", "b"]
    assert ids(inproc, "--updated-since", "2027-01-14", "--sort", "updated") == ["b", "f"]
    assert ids(inproc, "--created-since", "3650d") == ["f", "e", "d", "c", "b", "a"]
    assert ids(inproc, "--actor-type", "human") == ["d"]
    assert ids(inproc, "--actor-id", "planner-8", "--run-id", "run-1") == ["b"]
    assert ids(inproc, "--model", "m-2", "--source-document-id", "doc-9") == ["c"]
    assert ids(inproc, "--prompt-version", "v2") == ["b"]
    assert ids(inproc, "--on-behalf-of", "ana@example.com") == ["c"]
    assert ids(inproc, "--failed-step", "charge_payment") == ["b"]
    assert ids(inproc, "--reason-holds", "DECLINED") == ["b"]
    assert ids(inproc, "--about", "order_id=4471") == ["b", "a"]
    assert ids(inproc, "--about", "order_id=4471", "--about", "order_id=4472") == ["b"]
    assert ids(inproc, "--order", "asc", "--limit", "2") == ["a", "b"]
    table = inproc.ok("sagas", "list", "--catalogue", "fulfilment")
    assert "reserve_stock failed" in table
    assert " b " not in table


def test_three_pages_by_cursor(inproc: InProcess) -> None:
    fill(inproc, count=7)
    seen: list[str] = []
    first = inproc.json("sagas", "list", "--status", "completed", "--limit", "3", "--paged")
    assert set(first) == {"items", "next_cursor"}
    seen += [s["saga_id"] for s in first["items"]]
    second = inproc.json(
        "sagas", "list", "--status", "completed", "--limit", "3", "--cursor", first["next_cursor"]
    )
    seen += [s["saga_id"] for s in second["items"]]
    third = inproc.json(
        "sagas", "list", "--status", "completed", "--limit", "3", "--cursor", second["next_cursor"]
    )
    seen += [s["saga_id"] for s in third["items"]]
    assert seen == ["s6", "s5", "s4", "s3", "s2", "s1", "s0"]
    assert third["next_cursor"] is None
    # the plain JSON list stays a list; the cursor of the next page goes to stderr
    cut = inproc("sagas", "list", "--catalogue", "checkout", "--limit", "2", "--json")
    assert len(json.loads(cut.stdout)) == 2
    assert "--cursor " in cut.stderr
    text = inproc.ok("sagas", "list", "--catalogue", "checkout", "--limit", "2")
    assert "more sagas follow: --cursor" in text


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("--status", "finished"), "invalid_filter", "submitted, running"),
        (("--actor-type", "robot"), "invalid_filter", "agent, human, system"),
        (("--sort", "name"), "invalid_filter", "created, updated"),
        (("--created-since", "yesterday"), "invalid_filter", "neither a duration"),
        (("--reason-holds", "x" * 10_000), "invalid_filter", "longer than 200"),
        (("--about", "order_id"), "invalid_filter", "NAME=VALUE"),
        (("--cursor", "garbage"), "invalid_cursor", "next_cursor"),
        (("--catalogue", "c", "--limit", "20000"), "invalid_filter", "at most 10000"),
    ],
)
def test_a_bad_filter_is_a_clear_error(
    inproc: InProcess, args: tuple[str, ...], code: str, says: str
) -> None:
    fill(inproc)
    done = inproc("sagas", "list", *args, "--json")
    assert done.exit_code == 2
    assert done.stdout == ""
    error = json.loads(done.stderr)
    assert error["error"] == code
    assert says in error["message"]
    text = inproc("sagas", "list", *args)
    assert text.stderr.startswith(f"error [{code}]: ")


@pytest.mark.parametrize("command", [("sagas", "list"), ("sagas", "bulk", "resume")])
@pytest.mark.parametrize(
    ("option", "first", "second"),
    [
        ("--catalogue", "checkout", "fulfilment"),
        ("--reason-holds", "declined", "timeout"),
        ("--created-since", "7d", "1d"),
        ("--sort", "created", "updated"),
        ("--order", "asc", "desc"),
    ],
)
def test_a_filter_of_one_value_given_twice_is_refused(
    inproc: InProcess, command: tuple[str, ...], option: str, first: str, second: str
) -> None:
    """As the API and the pages refuse it: the last one would win, quietly."""
    fill(inproc)
    done = inproc(*command, option, first, option, second)
    assert done.exit_code == 2
    assert f"Invalid value for {option}: given 2 times; a search takes it once" in done.stderr


def test_the_filters_of_one_value_are_all_but_status_and_about() -> None:
    from pivotal.cli._filters import FILTERS, ONCE
    from pivotal.store.search import FIELDS

    assert set(ONCE) == set(FIELDS) - {"status", "about"}
    assert [p.name for p in FILTERS] == list(FIELDS)
