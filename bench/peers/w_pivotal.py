"""Pivotal's workload: sagas of 3 no-op compensable steps, run in this process.

Runs with the project's own ``.venv`` so it measures whatever Pivotal is in the working
tree. ``--mode parked`` submits and runs sagas whose fourth step is a pivot that waits for
approval, so they end parked (``awaiting_approval``) in the ledger; ``run`` finishes them.
``--mode unbounded`` is ``run`` with ``Orchestrator(max_active=None)``: every call starts its
pass at once instead of waiting its turn beyond 1,000. With ``--provider-ms`` each step
first waits that long for its provider (``asyncio.sleep``).
"""

from __future__ import annotations

import asyncio
import uuid

from common import STEPS, emit, parse, provider, timed
from pydantic import BaseModel

from pivotal import Catalogue, Orchestrator, Plan, SQLiteStore, StepContext, Store
from pivotal.declarations.policy import ApprovalRequirement


class NoArgs(BaseModel):
    n: int = 0


def catalogue() -> Catalogue:
    """Three kinds of no-op: a compensable step, and a pivot that always needs approval."""

    def always(step: str, args: BaseModel, plan: Plan) -> ApprovalRequirement | None:
        return ApprovalRequirement("benchmark gate")

    cat = Catalogue("bench", approval=always)

    async def undo(args: NoArgs, result: object, ctx: StepContext) -> None:
        return None

    @cat.compensable(undo=undo)
    async def noop(args: NoArgs, ctx: StepContext) -> dict[str, int]:
        await provider()
        return {"n": args.n}

    @cat.pivot()
    async def gate(args: NoArgs, ctx: StepContext) -> dict[str, int]:
        return {"n": args.n}

    return cat


def plan(parked: bool) -> Plan:
    steps = [{"name": "noop", "args": {"n": i}} for i in range(STEPS)]
    if parked:
        steps.append({"name": "gate", "args": {}})
    return Plan.model_validate({"catalogue": "bench", "steps": steps})


def open_store(db: str) -> Store:
    if db.startswith("postgres"):
        from pivotal.store.postgres import PostgresStore

        return PostgresStore(db, migrate=True)
    return SQLiteStore(db)


async def main() -> None:
    opts = parse(__doc__ or "", extra_modes=("parked", "unbounded"))
    parked = opts.mode == "parked"
    the_plan, run_id = plan(parked), f"{opts.tag}-{uuid.uuid4().hex[:8]}"
    async with open_store(opts.db) as store:
        if opts.mode == "setup":
            return
        if opts.mode == "unbounded":
            orch = Orchestrator(store, catalogue(), max_active=None)
        else:
            orch = Orchestrator(store, catalogue())
        want = "awaiting_approval" if parked else "completed"

        async def one(name: str) -> None:
            state = await orch.execute(the_plan, saga_id=f"{run_id}-{name}")
            if state.status.value != want:
                raise SystemExit(f"saga ended {state.status.value}, expected {want}")

        start, end = await timed(opts, one)
    emit("pivotal", opts, start, end, mode=opts.mode)


if __name__ == "__main__":
    asyncio.run(main())
