"""``pivotal searches list|save|delete`` and ``pivotal sagas list --saved NAME``: a person's
saved searches, the same the Sagas page and the API keep (``--by NAME``, else the OS user);
a saved search runs as its query does; bad input is one line ``error [code]`` and changes
nothing. The real console script runs the commands the manual shows (the command line's page)
on both ledgers."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

import pytest
from cli_harness import InProcess

from manual import page
from pivotal.cli._shared import os_user
from pivotal.store import SQLiteStore
from search_ledger import six


def fill(inproc: InProcess) -> None:
    async def work() -> None:
        async with SQLiteStore(inproc.ledger) as store:
            await six(store)

    asyncio.run(work())


def ids(inproc: InProcess, *args: str) -> list[str]:
    return [s["saga_id"] for s in inproc.json("sagas", "list", *args)]


def test_a_saved_search_runs_as_its_query_does(inproc: InProcess) -> None:
    fill(inproc)
    saved = inproc.json("searches", "save", "failed", "status=compensated&status=needs_human")
    assert saved["name"] == "failed"
    assert saved["query"] == "status=compensated&status=needs_human"
    assert set(saved) == {"name", "query", "created_at", "updated_at"}
    assert ids(inproc, "--saved", "failed") == ids(
        inproc, "--status", "compensated", "--status", "needs_human"
    )
    assert ids(inproc, "--saved", "failed") == ["e", "c", "b"]
    paged = inproc.json("sagas", "list", "--saved", "failed", "--limit", "2", "--paged")
    assert [s["saga_id"] for s in paged["items"]] == ["e", "c"]
    assert paged["next_cursor"]
    table = inproc.ok("sagas", "list", "--saved", "failed")
    assert "reserve_stock failed" in table
    assert inproc.json("searches", "list") == [saved]  # the OS user's, by default


def test_each_person_keeps_their_own_under_their_folded_name(inproc: InProcess) -> None:
    fill(inproc)
    inproc.ok("searches", "save", "mine", "status=running", "--by", "ann")
    inproc.ok("searches", "save", "mine", "catalogue=fulfilment", "--by", "bob")
    assert ids(inproc, "--saved", "mine", "--by", "Ann") == ["d"]
    assert ids(inproc, "--saved", "mine", "--by", "BOB") == ["e", "c"]
    assert [s["name"] for s in inproc.json("searches", "list", "--by", "ann")] == ["mine"]
    assert inproc.json("searches", "list", "--by", "carl") == []
    missing = inproc("sagas", "list", "--saved", "mine", "--by", "carl")
    assert missing.exit_code == 2
    assert "error [saved_search_not_found]" in missing.stderr
    refused = inproc("searches", "delete", "mine", "--by", "carl")
    assert refused.exit_code == 2
    assert "error [saved_search_not_found]" in refused.stderr
    assert inproc.json("searches", "delete", "mine", "--by", "ANN") == {"deleted": "mine"}
    assert inproc.json("searches", "list", "--by", "ann") == []
    assert [s["name"] for s in inproc.json("searches", "list", "--by", "bob")] == ["mine"]


def test_saving_again_replaces_and_the_table_shows_each_whole(inproc: InProcess) -> None:
    inproc.ok("searches", "save", "stuck", "status=running")
    inproc.ok("searches", "save", "stuck", "status=needs_human&created_since=7d")
    inproc.ok("searches", "save", "a name of many words", "catalogue=checkout")
    inproc.env["COLUMNS"] = "80"
    table = inproc.ok("searches", "list")
    assert any("a name of many words" in line for line in table.splitlines())  # whole
    assert "status=needs_human&created_since=7d" in table
    assert "status=running" not in table
    said = inproc.ok("searches", "save", "x", "status=running")
    assert said.strip() == "saved search 'x': status=running"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("save", "bad", "status=compensated&colour=red"), "invalid_filter"),
        (("save", "bad", "status=running&cursor=abc"), "invalid_filter"),
        (("save", "bad", "created_since=last week"), "invalid_filter"),
        (("save", "a/b", "status=running"), "invalid_saved_search"),
        (("save", "x" * 81, "status=running"), "invalid_saved_search"),
        (("save", "bad", "status=running", "--by", "\u200b"), "invalid_saved_search"),
        (("delete", "nope"), "saved_search_not_found"),
    ],
)
def test_bad_input_is_one_error_line_and_saves_nothing(
    inproc: InProcess, args: tuple[str, ...], code: str
) -> None:
    done = inproc("searches", *args)
    assert done.exit_code == 2, done.stdout
    assert done.stderr.startswith(f"error [{code}]: "), done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert inproc.json("searches", "list") == []
    as_json = inproc("searches", *args, "--json")
    assert json.loads(as_json.stderr)["error"] == code


def test_saved_runs_alone(inproc: InProcess) -> None:
    inproc.ok("searches", "save", "mine", "status=running")
    beside = inproc("sagas", "list", "--saved", "mine", "--catalogue", "checkout")
    assert beside.exit_code == 2
    assert "error [invalid_filter]" in beside.stderr
    assert "no filter beside it (catalogue)" in beside.stderr
    alone = inproc("sagas", "list", "--by", "ann")
    assert alone.exit_code == 2
    assert "--saved" in alone.stderr


def test_the_os_user_is_whose_they_are_by_default(inproc: InProcess) -> None:
    inproc.ok("searches", "save", "mine", "status=running")
    assert [s["name"] for s in inproc.json("searches", "list", "--by", os_user())] == ["mine"]


def shown_commands() -> list[list[str]]:
    """The commands "Saved searches" shows on the command line's page, each as its arguments."""
    section = page("how-to/command-line.md").partition("**Saved searches.**")[2]
    shown = section.partition("\n    pivotal ")[2].partition("\n\n")[0]
    return [shlex.split(line) for line in ("pivotal " + shown).splitlines()]


def test_the_manuals_commands_run_as_written_on_both_ledgers(any_cli: Any) -> None:
    commands = shown_commands()
    assert [c[:3] for c in commands] == [
        ["pivotal", "searches", "save"],
        ["pivotal", "searches", "list"],
        ["pivotal", "sagas", "list"],
        ["pivotal", "searches", "delete"],
    ]
    save, listing, run_it, delete = (c[1:] for c in commands)
    saved = any_cli.json(*save)
    assert saved["query"] == "status=needs_human&created_since=7d"
    assert "stuck" in any_cli.ok(*listing)
    assert [s["name"] for s in any_cli.json(*listing)] == ["stuck"]
    assert any_cli.json(*run_it) == []  # no saga waits for a person in a new ledger
    assert any_cli.json(*delete) == {"deleted": "stuck"}
    assert any_cli.json(*listing) == []
