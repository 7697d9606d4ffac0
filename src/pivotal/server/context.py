"""What every route shares, kept on the application's state."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from pivotal.clock import Clock
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.store.base import Store


@dataclass(frozen=True)
class Context:
    store: Store
    orchestrator: Orchestrator
    clock: Clock
    max_body: int


async def context(request: Request) -> Context:
    """The API's context; async, so that FastAPI calls it on the loop (a plain function
    dependency is run on a thread of the pool, a hop per request)."""
    found: Context = request.app.state.pivotal
    return found
