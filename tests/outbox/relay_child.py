"""A relay process that SIGKILLs itself at a chosen point (the crash test runs it).

    python relay_child.py LEDGER_URL RECEIVED_FILE POINT NTH OFFSET

The sink appends each message id it receives to RECEIVED_FILE (fsync'd before it returns).
The process kills itself the NTH time it reaches POINT:

``claimed``   a claim that took messages was committed
``received``  the sink received a message (and wrote it down); it is not settled
``settling``  inside the settle transaction, its statement run, before its commit
``settled``   a settle was committed

It takes the ledger's time to be OFFSET seconds past the real one (so the leases of a killed
predecessor have run out): its clock is not a ``SystemClock``, so the relay uses it as the
ledger's time as it is. Exit 0: it relayed until nothing was due without reaching the NTH point.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from pivotal.operations.relay import Relay
from pivotal.sagas.outbox import Message
from pivotal.store import native, open_store
from pivotal.store import sql_outbox as so
from pivotal.store.primitives import BatchResult, Stmt

SETTLES = {so.SETTLE_DELIVERED, so.SETTLE_RETRY, so.SETTLE_DEAD}


class Later:
    """The ledger's time, ``offset`` seconds on."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class Point:
    """Counts arrivals at the chosen point; dies at the NTH."""

    def __init__(self, name: str, nth: int) -> None:
        self.name, self.nth, self.seen = name, nth, 0

    def reached(self, name: str) -> None:
        if name != self.name:
            return
        self.seen += 1
        if self.seen == self.nth:
            os.kill(os.getpid(), signal.SIGKILL)


def append(path: str, line: str) -> None:
    """Append ``line`` to the file, on the disk before this returns."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


class Appending:
    name = "file"

    def __init__(self, path: str, point: Point) -> None:
        self.path, self.point = path, point

    async def deliver(self, message: Message) -> None:
        append(self.path, message.id)
        self.point.reached("received")


def hook_settling(store: Any, point: Point) -> None:
    """Reach ``settling`` inside the settle's transaction, before it commits."""

    def settling(stmts: Sequence[Stmt]) -> None:
        if any(s.sql in SETTLES for s in stmts):
            point.reached("settling")

    if hasattr(store, "_run_batch"):  # SQLite: the batch runs on the writer thread
        run_batch = store._run_batch

        def run(conn: Any, stmts: Sequence[Stmt]) -> BatchResult:
            result: BatchResult = run_batch(conn, stmts)
            settling(stmts)
            return result

        store._run_batch = run
        return
    from pivotal.store import postgres

    stepwise = postgres._stepwise

    async def stepwise_then(conn: Any, stmts: Sequence[Stmt]) -> BatchResult:
        result = await stepwise(conn, stmts)
        settling(stmts)
        return result

    postgres._stepwise = stepwise_then  # type: ignore[assignment]


async def main(url: str, received: str, name: str, nth: int, offset: float) -> None:
    point = Point(name, nth)
    if name == "settling":  # a point inside the transaction: the Python writer has one
        os.environ[native.WRITER_ENV] = "python"  # (the native one runs it without Python)
    store = open_store(url, create=False)
    await store.open()
    hook_settling(store, point)
    claim, settle = store.claim_messages, store.settle_message

    async def claiming(*args: Any, **kwargs: Any) -> list[Message]:
        found = await claim(*args, **kwargs)
        if found:
            point.reached("claimed")
        return found

    async def settling(*args: Any, **kwargs: Any) -> bool:
        held = await settle(*args, **kwargs)
        point.reached("settled")
        return held

    store.claim_messages = claiming  # type: ignore[method-assign]
    store.settle_message = settling  # type: ignore[method-assign]
    relay = Relay(
        store, [Appending(received, point)], clock=Later(offset), lease_ttl=30, timeout=10
    )
    await relay.run(until_idle=True, poll=0.0)
    await store.close()


if __name__ == "__main__":
    url, received, name, nth, offset = sys.argv[1:6]
    asyncio.run(main(url, received, name, int(nth), float(offset)))
