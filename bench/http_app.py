"""The app ``bench/http_load.py`` serves: one catalogue of 3 no-op compensable steps (the
benchmarks' workload), no rules, no approval, so that what is measured is the API, the
ledger and the worker."""

from __future__ import annotations

from pydantic import BaseModel

from pivotal import Catalogue, StepContext


class NoArgs(BaseModel):
    n: int = 0


app = Catalogue("bench", description="three no-op steps")


async def _undo(args: NoArgs, result: object, ctx: StepContext) -> None:
    return None


@app.compensable(undo=_undo)
async def noop(args: NoArgs, ctx: StepContext) -> dict[str, int]:
    """Does nothing, durably."""
    return {"n": args.n}
