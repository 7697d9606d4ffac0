"""What every route shares, kept on the application's state."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from pivotal.clock import Clock
from pivotal.orchestrator import Orchestrator
from pivotal.store.base import Store


@dataclass(frozen=True)
class Context:
    store: Store
    orchestrator: Orchestrator
    clock: Clock
    max_body: int


def context(request: Request) -> Context:
    found: Context = request.app.state.pivotal
    return found
