"""Which catalogues a command runs: a command that writes to the ledger needs them named
(``--app``/``PIVOTAL_APP``) or the bundled example chosen on purpose (``--example-app``);
an app that cannot be loaded is one clear error; the example keeps its services in a
documented place."""

from __future__ import annotations

from typing import Any

import pytest
from cli_harness import BAD_APPS, InProcess, make_ledger
from test_cli import checkout

# Commands that write to the ledger with the app's catalogues, and the arguments they need.
WRITERS = [
    ["submit", "PLAN"],
    ["execute", "PLAN"],
    ["worker", "--until-idle"],
    ["sweep"],
    ["sagas", "resume", "s1", "--by", "ops", "--reason", "fixed"],
    ["sagas", "resolve", "s1", "--by", "ops", "--reason", "by hand"],
    ["approvals", "approve", "s1", "--by", "ops"],
    ["approvals", "reject", "s1", "--by", "ops"],
    ["dead-letters", "retry", "1", "--by", "ops"],
    ["dead-letters", "resolve", "1", "--by", "ops", "--reason", "by hand"],
    ["escalations", "resolve", "1", "--by", "ops"],
    ["plan", "ship it", "--order", "4471", "--submit"],
    ["shadow", "run", "REQUESTS"],
]


def filled(args: list[str], inproc: InProcess) -> list[str]:
    (inproc.tmp / "requests.jsonl").write_text('{"context": {"order_id": "4471"}}\n')
    plan = inproc.plan("plan.json", checkout("order-1"))
    swap = {"PLAN": plan, "REQUESTS": str(inproc.tmp / "requests.jsonl")}
    return [swap.get(a, a) for a in args]


@pytest.mark.parametrize("args", WRITERS, ids=lambda a: " ".join(a[:2]))
def test_a_writer_without_an_app_is_refused(inproc: InProcess, args: list[str]) -> None:
    before = inproc.ledger.read_bytes()
    done = inproc.raw("--db", inproc.url, *filled(args, inproc))
    assert done.exit_code == 2
    assert done.stderr.startswith("error [app_required]: `pivotal ")
    assert "--app module:attribute (or set PIVOTAL_APP)" in done.stderr
    assert "pivotal --example-app " in done.stderr
    assert inproc.ledger.read_bytes() == before  # nothing was written
    assert not (inproc.tmp / "commerce.db").exists()


def test_the_example_on_purpose_runs(inproc: InProcess) -> None:
    plan = inproc.plan("plan.json", checkout("order-1"))
    assert inproc.raw("--db", inproc.url, "--example-app", "submit", plan).exit_code == 0
    done = inproc.raw("--db", inproc.url, "--example-app", "worker", "--until-idle")
    assert done.exit_code == 0
    assert "finished completed 1" in done.stdout


def test_an_app_from_the_environment_counts_as_named(inproc: InProcess) -> None:
    (inproc.tmp / "envapp.py").write_text(
        "from pivotal.examples.commerce import create_app\n"
        "def app():\n    return create_app(__import__('pathlib').Path(__file__).parent / 's.db')\n"
    )
    inproc.env["PIVOTAL_APP"] = "envapp:app"
    done = inproc.raw("--db", inproc.url, "submit", inproc.plan("p.json", checkout("order-1")))
    assert done.exit_code == 0, done.stderr
    both = inproc.raw("--db", inproc.url, "--example-app", "sweep")
    assert both.exit_code == 2
    assert both.stderr.startswith("error [usage]: Invalid value for --example-app: ")


def test_the_readers_validate_and_plan_keep_the_example(inproc: InProcess) -> None:
    plan = inproc.plan("plan.json", checkout("order-1"))
    assert inproc.raw("--db", inproc.url, "validate", plan).exit_code == 0
    dry = inproc.raw("--db", inproc.url, "plan", "ship it", "--order", "4471")
    assert dry.exit_code == 0, dry.stderr
    assert "dry run" in dry.stdout


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hostile_syntax:app", "cannot import 'hostile_syntax': syntax error in "),
        ("hostile_raises:app", "importing 'hostile_raises' raised RuntimeError: the module "),
        ("hostile_step:step", "'hostile_step:step' is the async function 'step' (a step?)"),
        ("hostile_step:value", "'hostile_step:value' is an object of type int, not an App"),
        ("hostile_step:missing", "module 'hostile_step' has no attribute 'missing'"),
        ("os:path", "'os:path' is the module 'posixpath', not an App"),
        (
            "pivotal.app:App",
            "'pivotal.app:App' is the class 'App', not an App or a Catalogue",
        ),
        (
            "pivotal.app:load_app",
            "('pivotal.app:load_app' needs arguments: spec)",
        ),
    ],
)
def test_an_app_that_cannot_load_is_one_clear_error(
    inproc: InProcess, spec: str, message: str
) -> None:
    for name, source in BAD_APPS.items():
        (inproc.tmp / name).write_text(source)
    plan = inproc.plan("plan.json", checkout("order-1"))
    done = inproc.raw("--db", inproc.url, "--app", spec, "validate", plan)
    assert done.exit_code == 2
    assert done.stderr.startswith("error [app_load_failed]: ")
    assert message in done.stderr


def test_an_app_can_be_a_catalogue_or_a_factory(inproc: InProcess) -> None:
    for name, source in BAD_APPS.items():
        (inproc.tmp / name).write_text(source)
    plan = inproc.plan("h.json", {"catalogue": "h", "steps": [{"name": "step", "args": {}}]})
    assert inproc.raw("--app", "hostile_step:app", "validate", plan).stdout == "valid\n"


def test_the_example_keeps_its_services_beside_a_sqlite_ledger(cli) -> None:
    elsewhere = cli.tmp / "ledgers"
    elsewhere.mkdir()
    cli.url = f"sqlite:///{elsewhere / 'ledger.db'}"
    make_ledger(cli.url)
    assert cli("submit", cli.plan("p.json", checkout("order-1"))).returncode == 0
    assert (elsewhere / "commerce.db").exists()
    assert not (cli.tmp / "commerce.db").exists()  # not in the working folder


def test_the_example_keeps_its_services_where_told_else_in_the_working_folder(
    any_cli: Any,
) -> None:
    cli = any_cli
    plan = cli.plan("p.json", checkout("order-1"))
    chosen = cli.tmp / "state" / "services.db"
    chosen.parent.mkdir()
    cli.env["PIVOTAL_COMMERCE_STATE"] = str(chosen)
    assert cli("submit", plan, "--saga-id", "s1").returncode == 0
    assert chosen.exists()
    assert not (cli.tmp / "commerce.db").exists()
    if cli.postgres:  # no ledger file to sit beside: the working folder
        del cli.env["PIVOTAL_COMMERCE_STATE"]
        assert cli("submit", plan, "--saga-id", "s2").returncode == 0
        assert (cli.tmp / "commerce.db").exists()
        err = cli("worker", "--until-idle").stderr
        assert "app the bundled commerce example (services in commerce.db)" in err
