"""The demo: the documents' scenarios on a fresh SQLite ledger, with timelines.

Each scenario states what its source document says happens (``story``) besides the saga's
final status, and the demo checks both against the ledger and the providers' own records.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from pivotal.declarations.plan import ActorType, Plan, Provenance
from pivotal.errors import InvalidInput
from pivotal.examples.commerce import CommerceApp, create_app
from pivotal.examples.commerce.apology import APOLOGY_TRIGGER, ApologySender
from pivotal.examples.commerce.faults import Fault, Faults
from pivotal.examples.commerce.services import CommerceServices
from pivotal.operations.relay import CallableSink, Relay
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.planning import PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.sagas.state import Event, EventType, SagaState, SagaStatus
from pivotal.store.base import Store
from pivotal.store.sqlite import SQLiteStore
from pivotal.views.planning_view import attempts_table
from pivotal.views.render import FittedTable, status_text, timeline

PROVENANCE = Provenance(actor_type=ActorType.SYSTEM, actor_id="pivotal-demo", run_id="demo")
MARKER = ".pivotal-demo"
"""The file that marks a folder as the demo's own: only such a folder is ever cleared."""
OWN_DATABASES = ("pivotal.db", "commerce.db")  # the ledger and the simulated services
OWN_FILES = tuple(f"{db}{suffix}" for db in OWN_DATABASES for suffix in ("", "-wal", "-shm"))


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def checkout_plan(order: str, *order_of: str, amount: str = "49.90") -> Plan:
    calls = {
        "reserve": call("reserve_stock", order_id=order, sku="sku-1", quantity=2),
        "charge": call("charge_payment", order_id=order, amount=amount),
        "ship": call("create_shipment", order_id=order),
        "notify": call("send_confirmation", order_id=order, recipient=f"{order}@example.com"),
    }
    names = order_of or ("reserve", "charge", "ship")
    return Plan.model_validate(
        {
            "catalogue": "checkout",
            "steps": [calls[n] for n in names],
            "rationale": f"place order {order}",
            "provenance": PROVENANCE.model_dump(),
        }
    )


def fulfilment_plan(order: str, amount: str) -> Plan:
    return Plan.model_validate(
        {
            "catalogue": "fulfilment",
            "steps": [
                call("reserve_stock", order_id=order, sku="lamp", quantity=1, warehouse="B"),
                call("authorize_payment", order_id=order, amount=amount),
                call("capture_payment", order_id=order, amount=amount),
                call("create_shipment", order_id=order, warehouse="B"),
                call(
                    "send_confirmation", order_id=order, recipient=f"customer-{order}@example.com"
                ),
            ],
            "rationale": (
                "Customer asked to ship from the closer warehouse (B). A goodwill credit for "
                "the delay is not in the catalogue; flagged for support to consider."
            ),
            "provenance": PROVENANCE.model_dump(),
        }
    )


@dataclass(frozen=True)
class Outcome:
    """What a scenario left behind: its saga, its event log and the providers' records."""

    state: SagaState
    events: list[Event]
    services: CommerceServices

    def _mine(self, key: str) -> bool:
        return key.startswith(f"{self.state.saga_id}:")

    def calls(self, op: str) -> list[str]:
        """The keys of this saga's calls of ``op``, in the order they were made."""
        return [c["key"] for c in self.services.calls(op) if self._mine(c["key"])]

    def effects(self, op: str) -> list[str]:
        """The keys of this saga's ``op`` effects the provider applied (once per key)."""
        return [e["key"] for e in self.services.rows("effects", op=op) if self._mine(e["key"])]

    def started(self) -> list[str]:
        """The steps whose action was called at least once, in plan order."""
        names = set(self._named(EventType.STEP_STARTED))
        return [r.name for r in self.state.steps if r.name in names]

    def undone(self) -> list[str]:
        """The steps undone, in the order their undos succeeded."""
        return self._named(EventType.UNDO_SUCCEEDED)

    def count(self, kind: EventType, step: str | None = None) -> int:
        """How many ``kind`` events the log holds (about ``step``, when given)."""
        return sum(step is None or name == step for name in self._named(kind))

    def _named(self, kind: EventType) -> list[str]:
        """The step of each ``kind`` event, by name, in log order."""
        steps = self.state.steps
        return [steps[e.step].name for e in self.events if e.type is kind and e.step is not None]


Story = list[tuple[str, bool]]
"""What a scenario's document says happens, each with whether it did."""


def _no_story(outcome: Outcome) -> Story:
    return []


@dataclass(frozen=True)
class Scenario:
    title: str
    plan: Plan
    faults: Callable[[Faults], object]
    expect: SagaStatus
    approve: bool = False
    story: Callable[[Outcome], Story] = _no_story


def _happy(o: Outcome) -> Story:
    return [
        (
            "every step ran once, nothing was undone",
            o.undone() == [] and o.count(EventType.STEP_STARTED) == len(o.state.steps),
        ),
        (
            "stock reserved, card charged, shipment booked",
            all(len(o.effects(op)) == 1 for op in ("reserve", "charge", "ship")),
        ),
    ]


def _flaky_inventory(o: Outcome) -> Story:
    key = f"{o.state.saga_id}:0"
    return [
        (
            "inventory was called three times, each with the key " + key,
            o.calls("reserve") == [key] * 3,
        ),
        ("one reservation was made", o.effects("reserve") == [key]),
        ("nothing was compensated", o.undone() == []),
    ]


def _declined(o: Outcome) -> Story:
    return [
        (
            "the declined charge made no payment and is not refunded",
            o.effects("charge") == [] and o.calls("refund") == [],
        ),
        ("only the reservation was undone", o.undone() == ["reserve_stock"]),
        ("create_shipment never ran", "create_shipment" not in o.started()),
    ]


def _cannot_ship(o: Outcome) -> Story:
    # 000's order that cannot ship: the carrier refuses, the card is refunded before the
    # stock is released, and the email, placed last because it cannot be unsent, never runs.
    return [
        ("the refund ran before the release", o.undone() == ["charge_payment", "reserve_stock"]),
        (
            "the refused shipment took no effect and is not cancelled",
            o.effects("ship") == [] and o.calls("cancel_shipment") == [],
        ),
        (
            "send_confirmation never ran",
            "send_confirmation" not in o.started() and o.calls("email") == [],
        ),
    ]


def _approved(o: Outcome) -> Story:
    a = o.state.approval
    return [
        (
            "the capture of 180 waited for a person (threshold 150)",
            a is not None and "180" in a.reason and "150" in a.reason,
        ),
        (
            "the approver saw the agent's rationale",
            a is not None and "closer warehouse" in a.rationale,
        ),
        (
            "after the approval: captured, shipped, confirmed once each",
            all(len(o.effects(op)) == 1 for op in ("capture", "ship", "email")),
        ),
    ]


def _authorisation_declined(o: Outcome) -> Story:
    # 002's variant: the authorisation fails for good; the reservation is released with a
    # key derived from the saga id and step index; the first release times out, and its
    # retry, with the same key, changes nothing.
    key = f"{o.state.saga_id}:0:undo"
    return [
        (
            "the release was called twice, both times with the key " + key,
            o.calls("release") == [key, key],
        ),
        (
            "the first release timed out and was retried",
            o.count(EventType.UNDO_RETRY_SCHEDULED, "reserve_stock") == 1,
        ),
        ("the retry was a no-op: one release took effect", o.effects("release") == [key]),
        (
            "nothing was captured, shipped or emailed",
            not any(o.calls(op) for op in ("capture", "ship", "email")),
        ),
    ]


def _stuck_after_capture(o: Outcome) -> Story:
    return [
        ("the capture took effect", len(o.effects("capture")) == 1),
        ("nothing was undone after the point of no return", o.count(EventType.UNDO_STARTED) == 0),
        ("no confirmation was sent ahead of the shipment", o.calls("email") == []),
    ]


def _release_fails(o: Outcome) -> Story:
    return [
        (
            "the release was parked as a dead letter",
            [r.name for r in o.state.dead_letters] == ["reserve_stock"],
        ),
        ("the refund still ran", o.undone() == ["charge_payment"]),
    ]


def scenarios() -> list[Scenario]:
    def none(f: Faults) -> None:
        pass

    return [
        Scenario(
            "checkout: happy path",
            checkout_plan("order-1"),
            none,
            SagaStatus.COMPLETED,
            story=_happy,
        ),
        Scenario(
            "checkout: inventory times out twice, retried into success",
            checkout_plan("order-2"),
            lambda f: f.next("reserve", Fault.TIMEOUT_BEFORE_EFFECT, Fault.TIMEOUT_BEFORE_EFFECT),
            SagaStatus.COMPLETED,
            story=_flaky_inventory,
        ),
        Scenario(
            "checkout: payment declined, only the reservation is undone",
            checkout_plan("order-3"),
            lambda f: f.next("charge", Fault.PERMANENT),
            SagaStatus.COMPENSATED,
            story=_declined,
        ),
        Scenario(
            "checkout: shipment refused, refund then release, no email",
            checkout_plan("order-4", "reserve", "charge", "ship", "notify"),
            lambda f: f.next("ship", Fault.PERMANENT),
            SagaStatus.COMPENSATED,
            story=_cannot_ship,
        ),
        Scenario(
            "fulfilment: order 4471, capture of 180 waits for approval",
            fulfilment_plan("4471", "180"),
            none,
            SagaStatus.COMPLETED,
            approve=True,
            story=_approved,
        ),
        Scenario(
            "fulfilment: order 4471 again, authorisation declined, release retried",
            fulfilment_plan("4471", "180"),
            lambda f: f.next("authorize", Fault.PERMANENT).next(
                "release", Fault.TIMEOUT_AFTER_EFFECT
            ),
            SagaStatus.COMPENSATED,
            story=_authorisation_declined,
        ),
        Scenario(
            "fulfilment: carrier keeps failing after the capture",
            fulfilment_plan("4472", "90"),
            lambda f: f.always("ship", Fault.TRANSIENT),
            SagaStatus.NEEDS_HUMAN,
            story=_stuck_after_capture,
        ),
        Scenario(
            "checkout: release refused during compensation",
            checkout_plan("order-5", "charge", "reserve", "ship"),
            # refused, so nothing of it can land: a person may retry it, or settle it, at once
            # (a release that timed out would be held back until its window ends)
            lambda f: f.next("ship", Fault.PERMANENT).always("release", Fault.PERMANENT),
            SagaStatus.COMPENSATION_FAILED,
            story=_release_fails,
        ),
    ]


async def play(
    orchestrator: Orchestrator,
    app: CommerceApp,
    scenario: Scenario,
    saga_id: str,
    console: Console,
) -> SagaState:
    services = app.services
    services.faults.clear()
    for order in ("4471", "4472"):
        services.order(order, customer=f"c-{order}")  # the same order, open again
    scenario.faults(services.faults)
    console.print(Rule(Text(scenario.title, style="bold")))
    state = await orchestrator.submit(scenario.plan, saga_id=saga_id)
    state = await orchestrator.run(state.saga_id)
    if state.status is SagaStatus.AWAITING_APPROVAL and state.approval is not None:
        _show_approval(console, state)
        if scenario.approve:
            state = await orchestrator.approve(state.saga_id, "ops-lead", "checked stock at B")
    events = await orchestrator.store.events(state.saga_id)
    console.print(timeline(state, events))
    console.print("outcome:", status_text(state.status), Text(state.reason or ""))
    return state


def _show_approval(console: Console, state: SagaState) -> None:
    assert state.approval is not None
    console.print(Text("paused for approval:", "cyan"), Text(state.approval.reason))
    console.print(Text("rationale shown to the approver:", "cyan"), Text(state.approval.rationale))


async def outcome(orchestrator: Orchestrator, app: CommerceApp, state: SagaState) -> Outcome:
    """The saga as stored now, its events and the services it ran against."""
    stored = await orchestrator.get(state.saga_id)
    return Outcome(stored.state, await orchestrator.store.events(state.saga_id), app.services)


def as_expected(scenario: Scenario, result: Outcome) -> tuple[bool, Story]:
    """Whether the scenario ended as its document says: its status and its whole story."""
    story = scenario.story(result)
    return result.state.status is scenario.expect and all(ok for _, ok in story), story


PLANNED = "fulfilment: order 4471 planned by a scripted agent, re-planned once"


def scripted_agent() -> ScriptedPlanner:
    """Stands in for a model: first the plan with a goodwill credit, then the plan without."""
    accepted = fulfilment_plan("4471", "180").model_dump(mode="json")
    steps = list(accepted["steps"])
    credit = call("apply_goodwill_credit", order_id="4471", amount="20")
    return ScriptedPlanner(
        [
            {
                "catalogue": "fulfilment",
                "steps": [*steps[:2], credit, *steps[2:]],
                "rationale": "Ship from the closer warehouse (B); credit 20 for the delay.",
            },
            {"catalogue": "fulfilment", "steps": steps, "rationale": accepted["rationale"]},
        ]
    )


async def play_planned(
    orchestrator: Orchestrator, app: CommerceApp, saga_id: str, console: Console
) -> tuple[Scenario, SagaState]:
    """The 002 worked example: a proposal with a step the catalogue lacks, a re-plan, the
    approval pause."""
    app.services.faults.clear()
    app.services.order("4471", customer="c-4471")
    console.print(Rule(Text(PLANNED, style="bold")))
    console.print(
        Text("planner: scripted (it replays two fixed proposals; no model is called)", "dim")
    )
    request = PlanRequest(
        text="Ship from the closer warehouse, and I expect something for the delay.",
        context={"order_id": "4471", "amount": "180", "sku": "lamp", "warehouse": "B"},
        catalogue="fulfilment",
        source_document_id="email-4471",
    )
    run = await plan_and_submit(request, scripted_agent(), orchestrator, saga_id=saga_id)
    console.print(attempts_table(run.attempts, args=False))
    if run.plan is None or run.saga_id is None:
        raise RuntimeError(f"the scripted re-plan was not accepted: {run.summary()}")
    state = await orchestrator.run(run.saga_id)
    if state.approval is not None:
        _show_approval(console, state)
    console.print(timeline(state, await orchestrator.store.events(state.saga_id)))
    console.print("outcome:", status_text(state.status), Text(state.reason or ""))
    attempts = [(a.accepted, [e.step for e in a.errors]) for a in run.attempts]

    def story(o: Outcome) -> Story:
        a = o.state.approval
        return [
            (
                "the goodwill credit was refused as a step the catalogue lacks, then re-planned",
                attempts == [(False, ["apply_goodwill_credit"]), (True, [])],
            ),
            (
                "the capture of 180 waits for a person, with the agent's rationale",
                a is not None and "180" in a.reason and "goodwill credit" in a.rationale,
            ),
            ("nothing past the authorisation ran", o.calls("capture") == []),
        ]

    scenario = Scenario(
        PLANNED, run.plan, lambda f: None, SagaStatus.AWAITING_APPROVAL, story=story
    )
    return scenario, state


def prepare_folder(out: Path) -> None:
    """Make ``out`` the demo's folder and clear what an earlier run of the demo left there.

    Only a new folder, an empty one, or one the demo marked as its own is used; from a
    marked folder only the demo's own ledger and services files are removed. Anything else
    is refused with ``InvalidInput`` before a file is touched.
    """
    if out.exists() and not out.is_dir():
        raise InvalidInput(f"--out {out} is a file; the demo needs a folder of its own")
    marker = out / MARKER
    if out.is_dir() and not marker.is_file() and any(out.iterdir()):
        raise InvalidInput(
            f"--out {out} already holds files the demo did not create; the demo clears its "
            "ledger on every run, so give it a new or empty folder"
        )
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(
        "This folder belongs to `pivotal demo`: every run deletes and recreates "
        f"{' and '.join(OWN_DATABASES)} here, and nothing else.\n"
    )
    for name in OWN_FILES:
        (out / name).unlink(missing_ok=True)


def _fresh_app(out: Path) -> CommerceApp:
    prepare_folder(out)
    return create_app(out / "commerce.db")


async def run_demo(out: Path, console: Console | None = None) -> list[tuple[Scenario, SagaState]]:
    """Play every scenario against a fresh ledger and fresh services in ``out``.

    ``out`` must be new, empty, or a folder an earlier demo made (``InvalidInput``
    otherwise). The summary says, for each scenario, whether its status and its story came
    out as the documents tell them, and how to go on with the sagas left waiting.
    """
    console = console or Console()
    app = _fresh_app(out)
    started = time.perf_counter()
    results: list[tuple[Scenario, SagaState]] = []
    verdicts: list[bool] = []
    async with SQLiteStore(out / "pivotal.db") as store:
        orchestrator = Orchestrator(store, app, owner="demo")
        for n, scenario in enumerate(scenarios(), 1):
            state = await play(orchestrator, app, scenario, f"demo-{n}", console)
            results.append((scenario, state))
            verdicts.append(_report(console, scenario, await outcome(orchestrator, app, state)))
        planned, state = await play_planned(orchestrator, app, f"demo-{len(results) + 1}", console)
        results.append((planned, state))
        verdicts.append(_report(console, planned, await outcome(orchestrator, app, state)))
        await send_apologies(store, app, console)
        letters = await store.dead_letters("open")
    app.services.close()
    summary = FittedTable(title="outcomes", title_justify="left", header_style="dim")
    for col, role in (
        ("scenario", "text"),
        ("saga", "id"),
        ("outcome", "fixed"),
        ("as expected", "text"),
    ):
        summary.column(col, role)  # type: ignore[arg-type]
    for (scenario, state), ok in zip(results, verdicts, strict=True):
        if ok:
            verdict = "yes"
        elif state.status is not scenario.expect:
            verdict = f"NO (expected {scenario.expect.value})"
        else:
            verdict = "NO (see its story above)"
        summary.add_row(Text(scenario.title), state.saga_id, status_text(state.status), verdict)
    console.print(Rule())
    console.print(summary)
    ledger = out / "pivotal.db"
    console.print(f"{len(results)} sagas in {time.perf_counter() - started:.2f}s; ledger: {ledger}")
    for line in next_steps(ledger, [s for _, s in results], [d.id for d in letters]):
        console.print(Text(line), soft_wrap=True)
    return results


APOLOGIES = "apologies: the outbox relayed once, to idle"


async def send_apologies(store: Store, app: CommerceApp, console: Console) -> ApologySender:
    """Relay the outbox once, until nothing is due: the customer of each rolled-back order
    gets one apology, driven by its ``saga.compensated`` message (never by an undo)."""
    console.print(Rule(Text(APOLOGIES, style="bold")))
    app.services.faults.clear()
    sender = ApologySender(store, app.services)
    sink = CallableSink(sender, types={APOLOGY_TRIGGER}, name="apology")
    done = await Relay(store, [sink]).run(until_idle=True, poll=0.0)
    console.print(
        Text(
            f"relay: {done.delivered} outbox messages delivered, {done.failed} failed, "
            f"{done.dead} dead; {APOLOGY_TRIGGER} went to the apology handler"
        )
    )
    for a in sender.handled:
        order = f"order {a.order_id} ({a.saga_id})"
        if a.sent:
            line = f"  apology to {a.recipient} for {order}, rolled back: {a.reason}"
        else:
            line = f"  no apology for {order}: {a.note.removeprefix('not sent: ')}"
        console.print(Text(line), soft_wrap=True)
    if not sender.handled:
        console.print(Text("  no order was rolled back"))
    return sender


def _report(console: Console, scenario: Scenario, result: Outcome) -> bool:
    ok, story = as_expected(scenario, result)
    for what, held in story:
        console.print(Text.assemble(("  ✓ " if held else "  ✗ ", "green" if held else "red"), what))
    return ok


def next_steps(ledger: Path, states: list[SagaState], dead_letters: list[int]) -> list[str]:
    """What to do next with the sagas the demo left waiting: exact commands. They run the
    bundled example (``--example-app``), whose services live beside the ledger."""
    cli = f"{_command()} --db {shlex.quote(f'sqlite:///{ledger}')} --example-app"
    lines = []
    for state in states:
        if state.status is SagaStatus.AWAITING_APPROVAL:
            lines += [
                f"{state.saga_id} waits for a person: approve its capture and it runs on to the "
                "end",
                f"  {cli} approvals approve {state.saga_id} --by you --run",
            ]
    for letter in dead_letters:
        lines += [
            f"dead letter {letter} is an undo that could not run: run it again, with its "
            "original undo key (the services work again now)",
            f"  {cli} dead-letters retry {letter} --by you",
        ]
    for state in states:
        if state.status is SagaStatus.NEEDS_HUMAN:
            lines += [
                f"{state.saga_id} needs a person: the carrier works again now, so resume it "
                "with the same keys",
                f"  {cli} sagas resume {state.saga_id} --by you --reason 'carrier is back' --run",
            ]
    view = f"{_command()} --db {shlex.quote(f'sqlite:///{ledger}')} sagas list"
    return [*lines, "every saga of the demo, with its status:", f"  {view}"]


def _command() -> str:
    """How to call the CLI again: ``pivotal`` when it is on PATH, else the path it ran from."""
    ran = Path(sys.argv[0])
    on_path = shutil.which(ran.name)
    if on_path and Path(on_path).resolve() == ran.resolve():
        return ran.name
    try:
        return shlex.quote(str(ran.resolve().relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(ran))
