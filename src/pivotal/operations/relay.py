"""The outbox relay: claims due messages from the ledger, hands each to its sinks, settles it.

Delivery is **at least once**, in order per saga. A message is settled only after every
sink took it; a relay that dies before settling leaves the message leased until its lease
runs out, and then it (or another relay) delivers it again, with the same ``id``, which
receivers dedupe on. When one of several sinks fails, the message is retried for all of
them: a sink may see a message again that it already took.

A failed delivery is retried by the relay's ``RetryPolicy`` (exponential backoff with full
jitter; by default about 5 s, 30 s, 3 min, 18 min, 2 h, 11 h, then up to a day apart), and
when the retries ran out the message is ``dead`` until an operator replays it (``pivotal
outbox replay ID``). A sink that raises ``DeliveryRejected`` (a webhook answering 410
Gone) makes the message dead at once. Every call into a sink is contained: any exception is
a failed delivery, and a sink that hangs is cut off after ``timeout`` seconds.

A ``Relay`` runs beside a worker in the same event loop: ``await relay.run(stop=event)``
returns once ``event`` is set (after settling what it holds).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from pivotal.clock import Clock, follow_ledger, synced
from pivotal.declarations.retry import RetryPolicy
from pivotal.errors import InvalidInput, PivotalError, StoreError
from pivotal.redaction import redact
from pivotal.sagas.outbox import Message
from pivotal.store.base import Store

__all__ = [
    "DEFAULT_RETRY",
    "CallableSink",
    "DeliveryError",
    "DeliveryRejected",
    "Handler",
    "Relay",
    "RelayConfigError",
    "RelayReport",
    "Settled",
    "Sink",
]

log = logging.getLogger("pivotal.relay")

Handler = Callable[[Message], Awaitable[None]]

# Webhook-like backoff: ceilings of 5 s, 30 s, 3 min, 18 min, 1.8 h, 10.8 h, then 24 h;
# ten attempts in all (full jitter draws each delay below its ceiling).
DEFAULT_RETRY = RetryPolicy(max_attempts=10, base_delay=5.0, multiplier=6.0, max_delay=86_400.0)


class DeliveryError(PivotalError):
    """A sink could not deliver the message; the relay tries again later."""

    code = "delivery_failed"

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # the receiver asked to wait at least this long


class DeliveryRejected(DeliveryError):
    """The receiver refused the message for good (e.g. HTTP 410 Gone): it is dead at once."""

    code = "delivery_rejected"


class RelayConfigError(InvalidInput):
    """The relay's settings are inconsistent."""

    code = "relay_invalid"


@runtime_checkable
class Sink(Protocol):
    """Where a relay delivers messages. ``deliver`` returning means delivered; raising
    means not (``DeliveryRejected``: never, the message is dead)."""

    name: str

    async def deliver(self, message: Message) -> None: ...


class CallableSink:
    """Hands messages to a Python callable. With ``types``, messages of other types count as
    delivered for this sink without calling it."""

    def __init__(
        self,
        handler: Handler,
        *,
        types: Collection[str] | None = None,
        name: str | None = None,
    ) -> None:
        self.handler = handler
        self.types = None if types is None else frozenset(types)
        self.name = name or getattr(handler, "__qualname__", None) or type(handler).__name__

    async def deliver(self, message: Message) -> None:
        if self.types is not None and message.type not in self.types:
            return
        result: object = self.handler(message)
        if inspect.isawaitable(result):  # a plain function is accepted too
            await result

    def __repr__(self) -> str:
        return f"CallableSink({self.name!r})"


@dataclass
class RelayReport:
    """What one round (or a whole run) of a relay did, in messages."""

    claimed: int = 0
    delivered: int = 0
    failed: int = 0  # failed; retried later
    dead: int = 0  # failed for good (retries ran out, or rejected)
    lost: int = 0  # settling was refused: the lease had passed to another relay
    unsettled: int = 0  # settling failed (the ledger); the lease runs out, it goes again
    deferred: int = 0  # claimed too late in the lease to start; it is claimed again

    def add(self, other: RelayReport) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def count(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)


# Called after each message is settled (or not): the message as claimed, the outcome (one
# of ``OUTCOMES``), and the error of a failed delivery.
Settled = Callable[[Message, str, str | None], None]


def default_owner() -> str:
    """A relay's name, unique to this process and this relay."""
    return f"relay-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Relay:
    """Delivers the outbox to ``sinks``: each round claims up to ``batch`` due messages
    (leased for ``lease_ttl`` seconds of the ledger's clock), delivers them (up to
    ``concurrency`` at once; they are of different sagas), and settles each. A sink call is
    cut off after ``timeout`` seconds, which must be well inside the lease, so that a lease
    never runs out while its message is being delivered: a message not started in time is
    left for the next round."""

    def __init__(
        self,
        store: Store,
        sinks: Sequence[Sink],
        *,
        clock: Clock | None = None,
        owner: str | None = None,
        batch: int = 100,
        lease_ttl: float = 60.0,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        timeout: float = 30.0,
        concurrency: int = 16,
        on_settled: Settled | None = None,
    ) -> None:
        if not sinks:
            raise RelayConfigError("a relay needs at least one sink")
        if batch < 1 or concurrency < 1:
            raise RelayConfigError("batch and concurrency must be at least 1")
        if not 0 < timeout < lease_ttl:
            raise RelayConfigError(
                f"the sink timeout ({timeout} s) must be positive and shorter than the "
                f"lease ({lease_ttl} s), or a slow delivery could outlive its lease"
            )
        self.store = store
        self.sinks = tuple(sinks)
        # every lease time is the ledger's, read through this process's clock (a fake clock
        # given by a test is its own time): relays whose clocks disagree agree on a lease
        self.clock: Clock = follow_ledger(clock, store)
        self.owner = owner or default_owner()
        self.batch = batch
        self.lease_ttl = lease_ttl
        self.retry = retry or DEFAULT_RETRY
        self.rng = rng or random.Random()
        self.timeout = timeout
        self.concurrency = concurrency
        self.on_settled = on_settled
        self._abandoned: set[asyncio.Future[None]] = set()  # sink calls cut off, still going

    # -- one round ------------------------------------------------------------------------

    async def run_once(self) -> RelayReport:
        """Claim due messages, deliver them, settle each; return the counts."""
        await synced(self.clock)  # times below are the ledger's
        now = self.clock.now()
        claimed = await self.store.claim_messages(self.owner, now, self.lease_ttl, self.batch)
        report = RelayReport(claimed=len(claimed))
        if not claimed:
            return report
        deadline = now + self.lease_ttl
        gate = asyncio.Semaphore(self.concurrency)

        async def relay(message: Message) -> None:
            async with gate:
                report.count(await self._relay(message, deadline))

        await asyncio.gather(*(relay(m) for m in claimed))
        return report

    async def _relay(self, message: Message, deadline: float) -> str:
        """Deliver one claimed message and settle it; return the outcome."""
        if self.clock.now() + self.timeout >= deadline:
            return self._settled(message, "deferred", None)
        failure = await self._deliver(message)
        now = self.clock.now()
        if failure is None:
            outcome, error, due = "delivered", None, None
        else:
            error = failure.message
            attempt = message.attempts + 1
            if isinstance(failure, DeliveryRejected) or self.retry.exhausted(attempt):
                outcome, due = "dead", None
            else:
                delay = max(self.retry.delay(attempt, self.rng), failure.retry_after or 0.0)
                outcome, due = "failed", now + delay
            log.warning("delivery of %s failed (attempt %d): %s", message.id, attempt, error)
        try:
            held = await self.store.settle_message(
                message.id,
                self.owner,
                now,
                delivered=failure is None,
                error=error,
                next_attempt_at=due,
            )
        except StoreError as exc:
            log.error(
                "could not settle %s (it will be delivered again): %s",
                message.id,
                redact(str(exc)),
            )
            return self._settled(message, "unsettled", error)
        if not held:
            log.warning("%s passed to another relay before it was settled", message.id)
            return self._settled(message, "lost", error)
        return self._settled(message, outcome, error)

    def _settled(self, message: Message, outcome: str, error: str | None) -> str:
        if self.on_settled is not None:
            try:
                self.on_settled(message, outcome, error)
            except Exception:  # an observer never stops the relay
                log.exception("the relay's on_settled callback failed")
        return outcome

    async def _deliver(self, message: Message) -> DeliveryError | None:
        """Hand ``message`` to every sink at once; the failure, if any sink failed."""
        failures = [
            f
            for f in await asyncio.gather(*(self._call(s, message) for s in self.sinks))
            if f is not None
        ]
        if not failures:
            return None
        # the error is logged, kept in the ledger and shown by `pivotal outbox list`: a
        # webhook URL's password or token in it (a sink's name, an HTTP client's message)
        # is redacted first
        text = redact("; ".join(f.message for f in failures))
        waits = [f.retry_after for f in failures if f.retry_after is not None]
        after = max(waits) if waits else None
        if any(isinstance(f, DeliveryRejected) for f in failures):
            return DeliveryRejected(text, retry_after=after)
        return DeliveryError(text, retry_after=after)

    async def _call(self, sink: Sink, message: Message) -> DeliveryError | None:
        """One contained sink call: an exception or a hang becomes a ``DeliveryError``. The
        call runs as a task of its own, so that even a sink that ignores its cancellation
        cannot hold the relay past ``timeout`` (it is cancelled and left behind)."""
        name = getattr(sink, "name", None) or type(sink).__name__
        call = asyncio.ensure_future(sink.deliver(message))
        try:
            done, _ = await asyncio.wait({call}, timeout=self.timeout)
        except asyncio.CancelledError:
            call.cancel()  # the relay itself is being cancelled
            raise
        if not done:
            call.cancel()
            self._abandoned.add(call)
            call.add_done_callback(self._abandoned.discard)
            return DeliveryError(f"{name}: no answer within {self.timeout:g} s")
        if call.cancelled():
            return DeliveryError(f"{name}: cancelled")
        exc = call.exception()
        if exc is None:
            return None
        if isinstance(exc, DeliveryError):
            kind = DeliveryRejected if isinstance(exc, DeliveryRejected) else DeliveryError
            return kind(f"{name}: {exc.message}", retry_after=exc.retry_after)
        if isinstance(exc, TimeoutError):
            return DeliveryError(f"{name}: timed out ({exc or 'no detail'})")
        return DeliveryError(f"{name}: {type(exc).__name__}: {exc}")

    # -- a run ----------------------------------------------------------------------------

    async def run(
        self,
        *,
        until_idle: bool = False,
        poll: float = 1.0,
        stop: asyncio.Event | None = None,
    ) -> RelayReport:
        """Relay rounds until ``stop`` is set (or, ``until_idle``, until a round finds
        nothing due); between rounds that found less than a batch, wait ``poll`` seconds.
        Return the totals. An error ends an ``until_idle`` run; otherwise it is logged and
        the next round tries again."""
        total = RelayReport()
        while stop is None or not stop.is_set():
            try:
                report = await self.run_once()
            except Exception as exc:  # the ledger unreachable, or a bug: never a dead relay
                if until_idle:
                    raise
                log.error("relay round failed: %s: %s", type(exc).__name__, redact(str(exc)))
            else:
                total.add(report)
                if until_idle and report.claimed == 0:
                    break
                if report.claimed >= self.batch:
                    continue  # more may be due right now
            await self._pause(poll, stop)
        return total

    async def _pause(self, seconds: float, stop: asyncio.Event | None) -> None:
        """Sleep on the relay's clock, waking early when ``stop`` is set."""
        if stop is None:
            await self.clock.sleep(seconds)
            return
        sleeping = asyncio.ensure_future(self.clock.sleep(seconds))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({sleeping, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, stopping):
                task.cancel()
            await asyncio.gather(sleeping, stopping, return_exceptions=True)
