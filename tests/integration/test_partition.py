"""A worker cut off from PostgreSQL for longer than its lease while a call is in flight, then
healed: another worker takes the saga over and settles it; the first, healed, neither
writes nor calls anything more, and nothing is lost or doubled.

The partition is a loopback proxy between the first worker and the server that stops
forwarding: its connections stay open and what is sent waits, as on a link that drops
packets until TCP's retransmissions get through once it heals."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pydantic import BaseModel

from pivotal import Catalogue, Orchestrator, Permanent, SagaStatus, StepContext, parse_plan
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.store.postgres import PostgresStore

LEASE = 2.0


class Link:
    """A TCP proxy on loopback to ``port``; ``cut()`` holds back what crosses it, ``heal()``
    lets it through again."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.open = asyncio.Event()
        self.open.set()
        self.server: asyncio.Server | None = None
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        self.open.clear()

    def heal(self) -> None:
        self.open.set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self.open.wait()  # cut: it waits for the link to heal
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(ConnectionError):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self.writers += [writer, up_writer]
        self.tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def close(self) -> None:
        """Close every connection it carried, and stop listening."""
        self.heal()
        if self.server is not None:
            self.server.close()
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()


class Item(BaseModel):
    n: int = 0


class Provider:
    def __init__(self) -> None:
        self.effects: dict[str, int] = {}
        self.undone: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.in_flight = asyncio.Event()
        self.release = asyncio.Event()


def catalogue_for(provider: Provider) -> Catalogue:
    catalogue = Catalogue("partition", default_timeout=1.0, doubt_grace=1.0)

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        provider.calls.append((ctx.key, ctx.step))
        if ctx.action_key in provider.effects:
            provider.undone.add(ctx.action_key)
        return "refunded"

    @catalogue.compensable(undo=refund)
    async def charge(args: Item, ctx: StepContext) -> dict[str, str]:
        provider.calls.append((ctx.key, ctx.step))
        provider.effects[ctx.key] = provider.effects.get(ctx.key, 0) or 1  # once per key
        if len(provider.calls) == 1:
            provider.in_flight.set()
            await provider.release.wait()  # the first call is slow; it lands, then returns
        return {"charged": ctx.key}

    @catalogue.pivot()
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    return catalogue


def config() -> WorkerConfig:
    return WorkerConfig(lease_ttl=LEASE, poll_interval=0.05, sweep_interval=0.2, drain_timeout=1.0)


async def test_a_worker_cut_off_from_postgres_past_its_lease_then_healed(
    postgres_url: str,
) -> None:
    port = int(postgres_url.rsplit(":", 1)[1].split("/", 1)[0])
    link = Link(port)
    await link.start()
    through_link = postgres_url.replace(f":{port}/", f":{link.port}/")
    provider = Provider()
    catalogue = catalogue_for(provider)
    plan = parse_plan({"catalogue": "partition", "steps": [{"name": "charge"}, {"name": "refuse"}]})
    async with PostgresStore(through_link) as cut_off, PostgresStore(postgres_url) as direct:
        first = Orchestrator(cut_off, catalogue, owner="cut-off", lease_ttl=LEASE)
        await first.submit(plan, saga_id="s")
        worker_a = Worker(first, config())
        running_a = asyncio.create_task(worker_a.run())
        await asyncio.wait_for(provider.in_flight.wait(), 30)  # its call is in flight
        link.cut()  # ... and the worker is cut off from the ledger

        second = Orchestrator(direct, catalogue, owner="direct", lease_ttl=LEASE)
        worker_b = Worker(second, config())
        running_b = asyncio.create_task(worker_b.run(until_idle=True))
        await asyncio.sleep(LEASE)  # the slow call stays in flight past the lease
        provider.release.set()  # the slow call lands while the first worker is cut off
        stats_b = await asyncio.wait_for(running_b, 60)  # b settled the saga
        state = (await second.get("s")).state

        link.heal()
        worker_a.stop()
        stats_a = await asyncio.wait_for(running_a, 60)
        events_after = await direct.events("s")

    await link.close()
    assert state.status is SagaStatus.COMPENSATED, state.reason
    assert stats_b.runs >= 1
    # b called nothing before the first call could no longer land; it settled the charge
    # with its key (no second effect) and refunded it; a, healed, wrote and called nothing
    keys = [k for k, _ in provider.calls]
    assert keys[0] == "s:0"
    assert keys.count("s:0") <= 2
    assert provider.effects == {"s:0": 1}
    assert "s:0" in provider.undone
    assert stats_a.leases_lost + stats_a.errors + stats_a.abandoned >= 1
    by = {e.data.get("by") for e in events_after if "by" in e.data}
    assert by <= {"cut-off", "direct"}
    late = [e for e in events_after if e.data.get("by") == "cut-off"]
    assert [e.type.value for e in late] == ["step_started"]  # only the first intent
