"""Terminal escapes in what agents and users wrote never reach the operator's terminal.

A plan's rationale and provenance (model, on behalf of, prompt), a policy's reason, step
results and errors, an approver's name and note, a planning request's text: each holds ESC
(a CSI and an OSC sequence), BEL, a C1 control, bidi overrides and console markup here.
Every command that prints them, as text and as JSON, must show them escaped: no ESC, BEL,
C1 or bidi character on stdout or stderr, no markup interpreted, no line forged by a
newline, and JSON that still parses.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import InProcess, make_ledger

pytestmark = pytest.mark.timeout(300)

EVIL = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u202eevil\u2066x\u2069\x9b[red]markup[/red]"
FORGED = "ok\nforged: yes"
FORBIDDEN = [
    "\x1b",
    "\x07",
    "\x9b",
    *(chr(c) for c in range(0x202A, 0x202F)),
    *(chr(c) for c in range(0x2066, 0x206A)),
]

APP = f"""
from typing import Any

from pydantic import BaseModel

from pivotal import Catalogue, StepContext
from pivotal.declarations.policy import ApprovalRequirement
from pivotal.declarations.retry import RetryPolicy

EVIL = {EVIL!r}


class Args(BaseModel):
    note: str = "n"


class AlwaysAsk:
    def __call__(self, step: str, args: BaseModel, plan: Any) -> ApprovalRequirement:
        return ApprovalRequirement(reason="check " + EVIL)


# an undo that raises may still land until its timeout and grace have passed, and the
# worker parks it only then: kept short, so the ledger is full within a second
app = Catalogue("hostile", approval=AlwaysAsk(), default_timeout=0.5, doubt_grace=0)


@app.compensable(undo_retry=RetryPolicy(max_attempts=1))
async def grab(args: Args, ctx: StepContext) -> dict[str, str]:
    return {{"got": args.note}}


@grab.undo
async def ungrab(args: Args, result: Any, ctx: StepContext) -> None:
    raise RuntimeError("undo broke " + EVIL)


@app.compensable(retryable=False)
async def fail(args: Args, ctx: StepContext) -> None:
    raise RuntimeError("fail " + EVIL + {FORGED!r})


@fail.undo
async def unfail(args: Args, result: Any, ctx: StepContext) -> None:
    return None


@app.pivot()
async def commit(args: Args, ctx: StepContext) -> dict[str, str]:
    return {{}}


async def refuse(message: Any) -> None:
    raise RuntimeError("the receiver says " + EVIL)
"""

PROVENANCE = {
    "actor_type": "agent",
    "actor_id": "bot" + EVIL,
    "model": "model" + EVIL,
    "prompt_version": "p" + EVIL,
    "on_behalf_of": "someone" + EVIL,
}


def hostile_plan(*names: str) -> dict[str, object]:
    return {
        "catalogue": "hostile",
        "steps": [{"name": n, "args": {"note": "note" + EVIL}} for n in names],
        "rationale": "because " + EVIL + FORGED,
        "provenance": PROVENANCE,
    }


def assert_clean(output: str) -> None:
    for char in FORBIDDEN:
        assert char not in output, (repr(char), output[:3000])
    for line in output.splitlines():
        assert not line.lstrip("│┃║ ").startswith("forged: yes"), output[:3000]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    """A ledger holding sagas, approvals, dead letters, outbox messages and planning runs
    all full of escapes: ``a1`` awaiting approval, ``a2`` approved, ``a3`` rejected, ``f1``
    compensation failed with its undo parked; outbox deliveries refused; an escalation."""
    tmp = tmp_path_factory.mktemp("escapes")
    (tmp / "hostile_app.py").write_text(APP)
    sys.path.insert(0, str(tmp))
    try:
        cli = InProcess(tmp)
        make_ledger(cli.url)
        cli.env["COLUMNS"] = "1000"  # wide enough that no cell is cut
        app = "hostile_app:app"
        for saga in ("a1", "a2", "a3"):
            cli.ok(
                "submit",
                cli.plan(f"{saga}.json", hostile_plan("grab", "commit")),
                "--saga-id",
                saga,
                app=app,
            )
        cli.ok(
            "submit", cli.plan("f1.json", hostile_plan("grab", "fail")), "--saga-id", "f1", app=app
        )
        cli.ok("worker", "--until-idle", "--poll", "0.05", app=app)
        cli.writes = {  # type: ignore[attr-defined]
            "approve": cli(
                "approvals", "approve", "a2", "--by", "al" + EVIL, "--note", EVIL, app=app
            ),
            "reject": cli(
                "approvals", "reject", "a3", "--by", "bo" + EVIL, "--note", FORGED, app=app
            ),
            "relay": cli(
                "outbox", "relay", "--callable", "hostile_app:refuse", "--until-idle", app=app
            ),
        }
        # planning, on the bundled example: a scripted planner proposes a plan the
        # validator refuses (its step, its arguments, its rationale hostile): escalated
        script = tmp / "script.json"
        bad = {"catalogue": "fulfilment", "steps": [{"name": "x" + EVIL, "args": {EVIL: EVIL}}]}
        script.write_text(json.dumps([bad | {"rationale": EVIL}]))
        planner = ["--planner", f"scripted:{script}", "--max-replans", "0"]
        escalated = cli(
            "plan",
            "ship it " + EVIL,
            "--order",
            "4471",
            "--field",
            "note=" + EVIL,
            *planner,
            "--submit",
        )
        assert "escalated as #1" in escalated.stdout, (escalated.stdout, escalated.stderr)
        cli.planner = planner  # type: ignore[attr-defined]
        requests = tmp / "requests.jsonl"
        request = {"catalogue": "fulfilment", "text": EVIL, "context": {"order_id": EVIL}}
        requests.write_text(json.dumps(request) + "\n")
        cli.ok("shadow", "run", str(requests), "--batch", "b" + EVIL)
        yield cli
    finally:
        sys.path.remove(str(tmp))


def test_the_ledger_holds_the_escapes(ledger: InProcess) -> None:
    """The test means something: the text is stored raw, and JSON gives it back exactly."""
    shown = ledger.json("sagas", "show", "a1", app="hostile_app:app")
    assert shown["rationale"] == "because " + EVIL + FORGED
    letters = ledger.json("dead-letters", "list", app="hostile_app:app")
    assert letters
    assert EVIL in letters[0]["error"]
    assert [e for e in ledger.json("escalations", "list")]


READS: list[tuple[str, ...]] = [
    ("sagas", "show", "a1"),
    ("sagas", "show", "a2"),
    ("sagas", "show", "a3"),
    ("sagas", "show", "f1"),
    ("sagas", "list"),
    ("approvals", "list"),
    ("dead-letters", "list"),
    ("dead-letters", "list", "--all"),
    ("report",),
    ("outbox", "list"),
    ("escalations", "list"),
    ("escalations", "show", "1"),
    ("shadow", "report"),
]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_no_escape_reaches_the_terminal(
    ledger: InProcess, command: tuple[str, ...], as_json: bool
) -> None:
    done = ledger(*command, *(["--json"] if as_json else []), app="hostile_app:app")
    assert done.exit_code == 0, (command, done.stdout, done.stderr)
    assert_clean(done.stdout)
    assert_clean(done.stderr)
    if as_json:
        json.loads(done.stdout)
    else:
        assert done.stdout.strip()


def test_the_escapes_are_shown_escaped_not_dropped(ledger: InProcess) -> None:
    shown = ledger.ok("sagas", "show", "a1", app="hostile_app:app")
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown
    assert "\\u202eevil" in shown
    assert "[red]markup[/red]" in shown  # shown as written, never read as markup
    assert "ok\\nforged: yes" in shown


@pytest.mark.parametrize("name", ["approve", "reject", "relay"])
def test_commands_that_write_echo_nothing_raw(ledger: InProcess, name: str) -> None:
    done = ledger.writes[name]  # type: ignore[attr-defined]
    assert_clean(done.stdout)
    assert_clean(done.stderr)


@pytest.mark.parametrize(
    "command",
    [
        ("plan", "ship it " + EVIL, "--order", "4471", "--source", "doc" + EVIL),
        ("plan", "ship it " + EVIL, "--order", "4471", "--json"),
        ("plan", "ship it " + EVIL, "--order", "4471", "--field", "k=" + EVIL, "SCRIPTED"),
        ("sagas", "show", "no" + EVIL),
        ("escalations", "show", "999"),
        ("sagas", "resolve", "f1", "--by", EVIL, "--reason", FORGED),
    ],
    ids=["plan", "plan-json", "plan-refused", "unknown-saga", "unknown-escalation", "resolve"],
)
def test_echoes_and_errors_are_escaped(ledger: InProcess, command: tuple[str, ...]) -> None:
    if command[-1] == "SCRIPTED":
        command = (*command[:-1], *ledger.planner)  # type: ignore[attr-defined]
    done = ledger(*command)
    assert_clean(done.stdout)
    assert_clean(done.stderr)


def test_a_refused_plan_echoes_its_errors_escaped(ledger: InProcess, tmp_path: Path) -> None:
    plan = {"catalogue": "hostile", "steps": [{"name": "x" + EVIL, "args": {EVIL: EVIL}}]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(plan))
    for command in (("validate", str(path)), ("submit", str(path))):
        done = ledger(*command, app="hostile_app:app")
        assert done.exit_code == 1, (done.stdout, done.stderr)
        assert_clean(done.stdout)
        assert_clean(done.stderr)


def test_settling_a_dead_letter_echoes_the_name_escaped(ledger: InProcess) -> None:
    app = "hostile_app:app"
    letters = ledger.json("dead-letters", "list", app=app)
    first = str(letters[0]["id"])
    done = ledger(
        "dead-letters", "resolve", first, "--by", FORGED + EVIL, "--reason", FORGED, app=app
    )
    assert done.exit_code == 0, (done.stdout, done.stderr)
    assert "ok\\nforged: yes" in done.stdout
    assert_clean(done.stdout)
    assert_clean(done.stderr)
