"""The ADK saga agent on the worked example, offline: ``python examples/adk_order_saga/main.py``.

PLAN (a model writes the order as data) -> reserve -> [CHECK: a model's verdict] -> charge
-> ship -> notify, on Pivotal's checkout catalogue with simulated services. A scripted model
stands in for Gemini, so no credentials or network are needed.

1. ship fails: the charge is refunded, then the reservation released; notify never runs.
2. the check says "invalid": ``saga_abort`` is set and the reservation is released.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import BaseModel

from pivotal import Orchestrator, SQLiteStore
from pivotal.adk import Act, Decide, SagaAgent, ScriptedLlm
from pivotal.examples.commerce import Fault, Faults, create_app


class OrderPlan(BaseModel):
    order_id: str
    sku: str
    quantity: int
    amount: str
    warehouse: str = "A"
    recipient: str


ORDER = {
    "order_id": "o-1001",
    "sku": "lamp",
    "quantity": 1,
    "amount": "89.00",
    "warehouse": "B",
    "recipient": "ana@example.com",
}


def order(state: Any) -> dict[str, Any]:
    return dict(state["order_plan"])


def pick(*names: str) -> Any:
    return lambda state: {n: order(state)[n] for n in names}


def build(orch: Orchestrator, verdict: str | None) -> SagaAgent:
    """The saga agent; with ``verdict`` a model stage judges the order after the reserve."""
    plan = LlmAgent(
        name="plan",
        model=ScriptedLlm.of(ORDER),
        instruction="Write the customer's order as data.",
        output_schema=OrderPlan,
        output_key="order_plan",
    )
    stages: list[Any] = [
        Decide(plan),
        Act("reserve_stock", pick("order_id", "sku", "quantity", "warehouse"), name="reserve"),
    ]
    if verdict is not None:
        check = LlmAgent(
            name="check",
            model=ScriptedLlm.of(verdict),
            instruction="Is this order valid? Answer valid or invalid.",
            output_key="verdict",
        )
        stages.append(
            Decide(
                check,
                abort_if=lambda s: (
                    None if s.get("verdict") == "valid" else "the check found the order invalid"
                ),
            )
        )
    stages += [
        Act("charge_payment", pick("order_id", "amount"), name="charge"),
        Act("create_shipment", pick("order_id", "warehouse"), name="ship"),
        Act("send_confirmation", pick("order_id", "recipient"), name="notify"),
    ]
    return SagaAgent(name="order_saga", orchestrator=orch, catalogue="checkout", stages=stages)


async def scenario(title: str, folder: Path, *, ship_fails: bool, verdict: str | None) -> None:
    faults = Faults()
    if ship_fails:
        faults.always("ship", Fault.PERMANENT)
    app = create_app(folder / "commerce.db", faults)
    # the order in the shop's order system: every plan is bound to its amount, lines and
    # recipient, so the agent's plan must be about this order as it stands
    facts = {k: ORDER[k] for k in ("amount", "sku", "quantity", "warehouse", "recipient")}
    app.services.order(str(ORDER["order_id"]), customer="ana", **facts)
    async with SQLiteStore(folder / "ledger.db") as store:
        orch = Orchestrator(store, app)
        sessions = InMemorySessionService()
        runner = Runner(agent=build(orch, verdict), app_name="shop", session_service=sessions)
        session = await sessions.create_session(app_name="shop", user_id="ana")
        message = types.Content(role="user", parts=[types.Part(text="one lamp, please")])
        print(f"== {title}")
        async for event in runner.run_async(
            user_id="ana", session_id=session.id, new_message=message
        ):
            delta = event.actions.state_delta
            if event.author == "order_saga" and delta:
                print(f"  {event.author}: {brief(delta)}")
        await runner.close()
        stored = await sessions.get_session(app_name="shop", user_id="ana", session_id=session.id)
        assert stored is not None
        print("  session state, read back:")
        for key, value in stored.state.items():
            if key.startswith("comp:"):
                shown = {k: value[k] for k in ("step", "key", "undo")}
                print(f"    {key} = {json.dumps(shown)}")
        print(f"    saga_status = {stored.state['saga_status']}")
        print(f"    saga_reason = {stored.state['saga_reason']}")
        calls = [f"{c['op']}" for c in app.services.calls()]
        print(f"  provider calls in order: {', '.join(calls)}")
    app.services.close()


def brief(delta: dict[str, Any]) -> str:
    """A state delta in one line: a comp record by its undo status."""
    parts = []
    for key, value in delta.items():
        if key.startswith("comp:"):
            value = f"<{value['step']} {value['key']}, undo {value['undo']}>"
        parts.append(f"{key}={value}")
    return ", ".join(parts)


async def main(tmp: str) -> None:
    first, second = Path(tmp, "one"), Path(tmp, "two")
    for folder in (first, second):
        folder.mkdir()
    await scenario("1. ship fails", first, ship_fails=True, verdict=None)
    await scenario("2. the check says invalid", second, ship_fails=False, verdict="invalid")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(main(workdir))
