"""A worker process that kills itself with SIGKILL at one crash site (for the harness).

    python -m pivotal.testing.crashworker --db sqlite:///ledger.db --app pkg.mod:app \\
        --crash-at after_effect:2 [--approve]

It runs sagas until none is active, approving pending pivots when ``--approve`` is given,
and exits 0 if the site was never reached.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os

from pivotal.declarations.app import load_app
from pivotal.hooks import Hook
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.store import open_store
from pivotal.testing.crash import CrashAt, CrashSite


async def work(
    db: str,
    app_spec: str,
    site: CrashSite | None,
    approve: bool,
    ttl: float,
    *,
    hook: Hook | None = None,
) -> None:
    """Run sagas until none is active; ``hook`` (else a SIGKILL at ``site``) at every
    protocol point."""
    app = load_app(app_spec)
    store = open_store(db)
    await store.open()
    try:
        # a process of its own: its own name (a restarted one must not wait for the name)
        orch = Orchestrator(store, app, owner=f"crashworker-{os.getpid()}", lease_ttl=ttl)
        if hook is None and site is not None:
            hook = CrashAt(site, kill=True)
        config = WorkerConfig(
            concurrency=4,
            lease_ttl=ttl,
            poll_interval=0.01,
            max_inline_wait=math.inf,
            sweep_interval=3600,
        )
        while True:
            await Worker(orch, config, hook=hook).run(until_idle=True)
            pending = await store.pending_approvals() if approve else []
            if not pending:
                return
            for p in pending:
                await orch.approve(p.saga_id, "crashworker-approver", run=False)
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--crash-at", type=CrashSite.parse, default=None)
    parser.add_argument("--approve", action="store_true")
    parser.add_argument("--lease-ttl", type=float, default=5.0)
    args = parser.parse_args()
    asyncio.run(work(args.db, args.app, args.crash_at, args.approve, args.lease_ttl))


if __name__ == "__main__":
    main()
