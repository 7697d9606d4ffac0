"""Helpers for the ADK tests: the worked example's agent, a runner, reading sessions back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import BaseModel

from pivotal import Orchestrator, SagaState
from pivotal.adk import Act, Decide, SagaAgent, ScriptedLlm
from pivotal.adk.stages import State
from pivotal.examples.commerce import CommerceServices

Checker = Callable[[str], Awaitable[SagaState]]
APP = "orders"
USER = "ana"


class OrderPlan(BaseModel):
    """What the planning model writes through ``output_key``."""

    order_id: str
    sku: str
    quantity: int
    amount: str
    warehouse: str = "A"
    recipient: str


ORDER = {
    "order_id": "o-77",
    "sku": "sku-1",
    "quantity": 2,
    "amount": "49.90",
    "warehouse": "A",
    "recipient": "ana@example.com",
}
ANOTHER_ORDER = ORDER | {"order_id": "o-78"}  # the same again, for a second saga


def open_order(services: CommerceServices, order: dict[str, Any]) -> None:
    """``order`` (as the planning model writes it) open in the order system, with these
    facts: the shipped catalogues bind every plan to its order's amount, lines, warehouse
    and recipient."""
    services.order(
        order["order_id"],
        customer=f"c-{order['order_id']}",
        amount=order["amount"],
        lines=[{"sku": order["sku"], "quantity": order["quantity"]}],
        warehouse=order.get("warehouse", "A"),
        recipient=order["recipient"],
    )


def plan_stage(reply: dict[str, Any] | None = None) -> Decide:
    model = ScriptedLlm.of(reply or ORDER)
    agent = LlmAgent(
        name="plan",
        model=model,
        instruction="Read the order and write it as data.",
        output_schema=OrderPlan,
        output_key="order_plan",
    )
    return Decide(agent)


def check_stage(verdict: str) -> Decide:
    """A model that judges the order; the deterministic check turns "invalid" into a
    rollback."""
    agent = LlmAgent(
        name="check",
        model=ScriptedLlm.of(verdict),
        instruction="Answer valid or invalid.",
        output_key="verdict",
    )

    def invalid(state: State) -> str | None:
        v = str(state.get("verdict", "")).strip().lower()
        return None if v == "valid" else f"the order check said {v!r}"

    return Decide(agent, abort_if=invalid)


def _order(state: State) -> dict[str, Any]:
    plan = state["order_plan"]
    assert isinstance(plan, dict)
    return plan


def acts() -> list[Act]:
    return [
        Act(
            "reserve_stock",
            lambda s: {k: _order(s)[k] for k in ("order_id", "sku", "quantity", "warehouse")},
            name="reserve",
        ),
        Act(
            "charge_payment",
            lambda s: {"order_id": _order(s)["order_id"], "amount": _order(s)["amount"]},
            name="charge",
        ),
        Act(
            "create_shipment",
            lambda s: {"order_id": _order(s)["order_id"], "warehouse": _order(s)["warehouse"]},
            name="ship",
        ),
        Act(
            "send_confirmation",
            lambda s: {"order_id": _order(s)["order_id"], "recipient": _order(s)["recipient"]},
            name="notify",
        ),
    ]


def order_agent(
    orch: Orchestrator,
    *,
    check: Decide | None = None,
    plan: Decide | None = None,
    **options: Any,
) -> SagaAgent:
    """PLAN -> reserve -> [CHECK] -> charge -> ship -> notify, on the checkout catalogue
    (``options``: more of the SagaAgent's fields)."""
    steps = acts()
    stages: list[Any] = [plan or plan_stage(), steps[0]]
    if check is not None:
        stages.append(check)
    stages += steps[1:]
    return SagaAgent(
        name="order_saga", orchestrator=orch, catalogue="checkout", stages=stages, **options
    )


class Session:
    """One ADK session of an agent, run with a Runner over InMemorySessionService."""

    def __init__(self, agent: Any) -> None:
        self.sessions = InMemorySessionService()
        self.runner = Runner(agent=agent, app_name=APP, session_service=self.sessions)
        self.id: str | None = None
        self.events: list[Event] = []

    def rebind(self, agent: Any) -> None:
        """Run another agent (a restarted process) over the same sessions."""
        self.runner = Runner(agent=agent, app_name=APP, session_service=self.sessions)

    async def run(self, text: str = "place my order") -> list[Event]:
        if self.id is None:
            self.id = (await self.sessions.create_session(app_name=APP, user_id=USER)).id
        message = types.Content(role="user", parts=[types.Part(text=text)])
        out = []
        async for event in self.runner.run_async(
            user_id=USER, session_id=self.id, new_message=message
        ):
            out.append(event)
        self.events += out
        return out

    async def state(self) -> dict[str, Any]:
        """The session read back from the session service (what was persisted)."""
        assert self.id is not None
        stored = await self.sessions.get_session(app_name=APP, user_id=USER, session_id=self.id)
        assert stored is not None
        return dict(stored.state)

    async def close(self) -> None:
        await self.runner.close()


def comp_records(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k.startswith("comp:")}


def deltas(events: Sequence[Event], author: str = "order_saga") -> list[dict[str, Any]]:
    return [dict(e.actions.state_delta) for e in events if e.author == author]
