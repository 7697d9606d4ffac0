"""Ctrl-C on `pivotal execute`: one line saying what it left of the saga and how to go on,
exit 130, no traceback; the saga stays in the ledger for a worker."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from test_cli import checkout

from pivotal.cli._shared import Settings
from pivotal.cli.ops import AT_REST, _left

BLOCKING_APP = """
import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from pivotal import Catalogue


class Args(BaseModel):
    n: int = 1


app = Catalogue("blocks")


async def forget(args, result, ctx):
    return None


@app.compensable(undo=forget)
async def wait_here(args: Args, ctx):
    Path(os.environ["BLOCK_STARTED"]).write_text(ctx.saga_id)  # the test waits for this
    await asyncio.Event().wait()  # never set: the call is in flight until Ctrl-C
    return {}
"""
PLAN = {"catalogue": "blocks", "steps": [{"name": "wait_here", "args": {}}]}


def test_ctrl_c_on_execute_says_what_it_left_and_how_to_go_on(cli: Any) -> None:
    (cli.tmp / "blocks.py").write_text(BLOCKING_APP)
    started = cli.tmp / "started"
    cli.env["BLOCK_STARTED"] = str(started)
    plan = cli.plan("plan.json", PLAN)
    running = cli.start("execute", plan, "--saga-id", "s-1", name="execute", app="blocks:app")
    cli.wait_for(started.exists, what="the step to start")
    running.send_signal(signal.SIGINT)
    assert running.wait(timeout=60) == 130
    out, err = cli.output("execute")
    assert out == ""
    assert err.splitlines() == [
        "error [interrupted]: saga s-1 left running at step 0 (wait_here); a worker goes on "
        "with it once this process's lease lapses (within 60s): run `pivotal worker`; "
        "`pivotal sagas show s-1` shows where it is"
    ]
    shown = cli.json("sagas", "show", "s-1")
    assert shown["status"] == "running"
    assert [s["status"] for s in shown["steps"]] == ["started"]


def test_what_an_interrupted_execute_says_it_left(cli: Any) -> None:
    """The message for each case: no saga yet, a saga at rest (a Ctrl-C after its last
    write), a saga some step of which is in flight (the real Ctrl-C above)."""
    cli("execute", cli.plan("done.json", checkout("order-1")), "--saga-id", "s-2")
    status = cli.json("sagas", "show", "s-2")["status"]
    assert status in {s.value for s in AT_REST}
    settings = Settings(db=cli.url)
    table = [
        ("never-made", "stopped before saga never-made was recorded: nothing was written"),
        ("s-2", f"saga s-2 is {status}; `pivotal sagas show s-2` shows where it is"),
    ]
    for saga_id, said in table:
        assert asyncio.run(_left(settings, saga_id, [60.0])) == said
