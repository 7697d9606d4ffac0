"""The demo: the documents' scenarios on a fresh SQLite ledger, with timelines."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from pivotal.examples.commerce import CommerceApp, create_app
from pivotal.examples.commerce.faults import Fault, Faults
from pivotal.orchestrator import Orchestrator
from pivotal.plan import ActorType, Plan, Provenance
from pivotal.planning import PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.planning.views import attempts_table
from pivotal.render import status_text, timeline
from pivotal.state import SagaState, SagaStatus
from pivotal.store.sqlite import SQLiteStore

PROVENANCE = Provenance(actor_type=ActorType.SYSTEM, actor_id="pivotal-demo", run_id="demo")


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def checkout_plan(order: str, *order_of: str, amount: str = "49.90") -> Plan:
    calls = {
        "reserve": call("reserve_stock", order_id=order, sku="sku-1", quantity=2),
        "charge": call("charge_payment", order_id=order, amount=amount),
        "ship": call("create_shipment", order_id=order),
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
                call("send_confirmation", order_id=order, recipient=f"{order}@example.com"),
            ],
            "rationale": (
                "Customer asked to ship from the closer warehouse (B). A goodwill credit for "
                "the delay is not in the catalogue; flagged for support to consider."
            ),
            "provenance": PROVENANCE.model_dump(),
        }
    )


@dataclass(frozen=True)
class Scenario:
    title: str
    plan: Plan
    faults: Callable[[Faults], object]
    expect: SagaStatus
    approve: bool = False


def scenarios() -> list[Scenario]:
    def none(f: Faults) -> None:
        pass

    return [
        Scenario("checkout: happy path", checkout_plan("order-1"), none, SagaStatus.COMPLETED),
        Scenario(
            "checkout: inventory times out twice, retried into success",
            checkout_plan("order-2"),
            lambda f: f.next("reserve", Fault.TIMEOUT_BEFORE_EFFECT, Fault.TIMEOUT_BEFORE_EFFECT),
            SagaStatus.COMPLETED,
        ),
        Scenario(
            "checkout: payment declined, only the reservation is undone",
            checkout_plan("order-3"),
            lambda f: f.next("charge", Fault.PERMANENT),
            SagaStatus.COMPENSATED,
        ),
        Scenario(
            "checkout: shipment refused, refund then release",
            checkout_plan("order-4"),
            lambda f: f.next("ship", Fault.PERMANENT),
            SagaStatus.COMPENSATED,
        ),
        Scenario(
            "fulfilment: order 4471, capture of 180 waits for approval",
            fulfilment_plan("4471", "180"),
            none,
            SagaStatus.COMPLETED,
            approve=True,
        ),
        Scenario(
            "fulfilment: order 4471 again, authorisation declined",
            fulfilment_plan("4471", "180"),
            lambda f: f.next("authorize", Fault.PERMANENT),
            SagaStatus.COMPENSATED,
        ),
        Scenario(
            "fulfilment: carrier keeps failing after the capture",
            fulfilment_plan("4472", "90"),
            lambda f: f.always("ship", Fault.TRANSIENT),
            SagaStatus.NEEDS_HUMAN,
        ),
        Scenario(
            "checkout: release fails during compensation",
            checkout_plan("order-5", "charge", "reserve", "ship"),
            lambda f: f.next("ship", Fault.PERMANENT).always("release", Fault.TRANSIENT),
            SagaStatus.COMPENSATION_FAILED,
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
    console.print(Rule(f"[bold]{scenario.title}"))
    state = await orchestrator.submit(scenario.plan, saga_id=saga_id)
    state = await orchestrator.run(state.saga_id)
    if state.status is SagaStatus.AWAITING_APPROVAL and state.approval is not None:
        console.print("[cyan]paused for approval:[/]", Text(state.approval.reason))
        console.print("[cyan]rationale shown to the approver:[/]", Text(state.approval.rationale))
        if scenario.approve:
            state = await orchestrator.approve(state.saga_id, "ops-lead", "checked stock at B")
    events = await orchestrator.store.events(state.saga_id)
    console.print(timeline(state, events))
    console.print("outcome:", status_text(state.status), Text(state.reason or ""))
    return state


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
    console.print(Rule(f"[bold]{PLANNED}"))
    console.print("[dim]planner: scripted (it replays two fixed proposals; no model is called)[/]")
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
        console.print("[cyan]paused for approval:[/]", Text(state.approval.reason))
        console.print("[cyan]rationale shown to the approver:[/]", Text(state.approval.rationale))
    console.print(timeline(state, await orchestrator.store.events(state.saga_id)))
    console.print("outcome:", status_text(state.status), Text(state.reason or ""))
    scenario = Scenario(PLANNED, run.plan, lambda f: None, SagaStatus.AWAITING_APPROVAL)
    return scenario, state


def _fresh_app(out: Path) -> CommerceApp:
    out.mkdir(parents=True, exist_ok=True)
    for name in ("pivotal.db", "commerce.db"):
        for suffix in ("", "-wal", "-shm"):
            (out / f"{name}{suffix}").unlink(missing_ok=True)
    return create_app(out / "commerce.db")


async def run_demo(out: Path, console: Console | None = None) -> list[tuple[Scenario, SagaState]]:
    """Play every scenario against a fresh ledger and fresh services in ``out``."""
    console = console or Console()
    app = _fresh_app(out)
    started = time.perf_counter()
    results = []
    async with SQLiteStore(out / "pivotal.db") as store:
        orchestrator = Orchestrator(store, app, owner="demo")
        for n, scenario in enumerate(scenarios(), 1):
            saga_id = f"demo-{n}"
            results.append((scenario, await play(orchestrator, app, scenario, saga_id, console)))
        saga_id = f"demo-{len(results) + 1}"
        results.append(await play_planned(orchestrator, app, saga_id, console))
    app.services.close()
    summary = Table(title="outcomes", title_justify="left", header_style="dim")
    for col in ("scenario", "saga", "outcome", "as expected"):
        summary.add_column(col)
    for scenario, state in results:
        ok = "yes" if state.status is scenario.expect else f"NO (expected {scenario.expect.value})"
        summary.add_row(scenario.title, state.saga_id, status_text(state.status), ok)
    console.print(Rule())
    console.print(summary)
    console.print(
        f"{len(results)} sagas in {time.perf_counter() - started:.2f}s; ledger: "
        f"{out / 'pivotal.db'}  (try: {_command()} --db sqlite:///{out / 'pivotal.db'} "
        "sagas list)"
    )
    return results


def _command() -> str:
    """How to call the CLI again: ``pivotal`` when it is on PATH, else the path it ran from."""
    ran = Path(sys.argv[0])
    on_path = shutil.which(ran.name)
    if on_path and Path(on_path).resolve() == ran.resolve():
        return ran.name
    try:
        return str(ran.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(ran)
