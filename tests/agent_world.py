"""What no agent may be told, and a catalogue to tell it with: a step whose provider's refusal
echoes the bearer token it was sent. Shared by the tests of every surface that answers an
agent (HTTP, MCP, the outbox, the planning loop, ADK)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from pivotal import Catalogue, Permanent, StepContext
from pivotal.declarations.app import App
from pivotal.declarations.policy import Rollout

TOKEN = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
LEAK = f"provider answered 401 to 'Authorization: Bearer {TOKEN}' (trace t-77)"

# The rollout limit the tests set: a number no schema, id or time of theirs contains.
LIMIT = Decimal("7.25")
APPROVER, NOTE = "ann-approver", "her card is on our watch list"
OPERATOR, WHY = "olga-operator", "duplicate of the order placed by phone"

# Words and numbers of the policy and of the people who decide: never in an agent's view.
SECRETS = (
    "threshold",
    "exceeds",
    "150",  # the commerce catalogues' approval threshold
    "7.25",
    "rollout limit",
    "tier",
    "approvers",
    "approved_by",
    APPROVER,
    NOTE,
    OPERATOR,
    WHY,
    TOKEN,
    "Bearer",
)


def told(value: Any) -> list[str]:
    """Which of ``SECRETS`` the answer ``value`` (text, or JSON-able) gives away (a number
    counts on its own, not as digits of a longer one: a time, an id)."""
    text = (value if isinstance(value, str) else json.dumps(value, default=str)).lower()
    return [s for s in SECRETS if re.search(_alone(s.lower()), text)]


def _alone(secret: str) -> str:
    if secret.replace(".", "").isdigit():
        return rf"(?<![\d.]){re.escape(secret)}(?![\d])"
    return re.escape(secret)


def rollout(above: str = "shadow") -> Rollout:
    return Rollout(execute_below=LIMIT, above=above)  # type: ignore[arg-type]


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str = "n"


def provider_catalogue() -> Catalogue:
    """``book`` (compensable), ``call_provider`` (compensable), ``confirm`` (the pivot) and
    ``notify_provider`` (retriable): ``call_provider`` and ``notify_provider`` always fail
    with ``LEAK``."""
    catalogue = Catalogue("provider", description="a booking confirmed by a provider")

    async def unbook(args: Any, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=unbook)
    async def book(args: Note, ctx: StepContext) -> dict[str, str]:
        """Book a slot."""
        return {"booking": "b-1"}

    async def uncall(args: Any, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=uncall)
    async def call_provider(args: Note, ctx: StepContext) -> None:
        """Confirm the booking with the provider."""
        raise Permanent(LEAK)

    @catalogue.pivot()
    async def confirm(args: Note, ctx: StepContext) -> None:
        """Confirm the booking: the point of no return."""
        return None

    @catalogue.retriable()
    async def notify_provider(args: Note, ctx: StepContext) -> None:
        """Tell the provider, after the point of no return."""
        raise Permanent(LEAK)

    return catalogue


def with_provider(app: App) -> App:
    """``app`` serving the provider catalogue too."""
    made = provider_catalogue()
    made.check()
    app.catalogues[made.name] = made
    return app


def provider_plan() -> dict[str, Any]:
    return {
        "catalogue": "provider",
        "steps": [{"name": "book", "args": {}}, {"name": "call_provider", "args": {}}],
        "rationale": "book a slot",
    }


def parked_plan() -> dict[str, Any]:
    """Its last step fails after the point of no return: the saga waits for a person."""
    steps = [{"name": n, "args": {}} for n in ("book", "confirm", "notify_provider")]
    return {"catalogue": "provider", "steps": steps, "rationale": "book and confirm a slot"}
