"""How a pass calls into a step's code: its context and progress reports, the lease's
check before each call, the bound on a call's time, and the step's lookup. A call cut
short raises ``Abandoned`` (its bound passed) or ``Cancelled`` (the saga was aborted)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable
from typing import Any

from pivotal.declarations.catalogue import Step, StepContext, StepKind, action_key, undo_key
from pivotal.engine.journal import Journal, Suspended
from pivotal.engine.machine import Found
from pivotal.engine.telemetry import Call
from pivotal.engine.values import jsonable
from pivotal.errors import LeaseLost, StoreError
from pivotal.hooks import Point
from pivotal.sagas.progress import Reporter
from pivotal.sagas.state import EventType, SagaStatus

log = logging.getLogger("pivotal.engine")
_COMPENSABLE = StepKind.COMPENSABLE.value


class Abandoned(TimeoutError):
    """A call reached its time limit and was left: it may still take effect."""


class Cancelled(Exception):
    """Raised into an action at its progress report: the saga was aborted meanwhile. An
    action that reports progress has nothing in flight at its reports (what it called
    before returned), so it may stop there."""


class Calls(Journal):
    """What every part of a pass uses to call a step's code."""

    __slots__ = ()

    def context(self, index: int, attempt: int, *, undo: bool = False) -> StepContext:
        key = action_key(self.state.saga_id, index)
        return StepContext(
            saga_id=self.state.saga_id,
            index=index,
            step=self.state.steps[index].name,
            key=undo_key(self.state.saga_id, index) if undo else key,
            action_key=key,
            attempt=attempt,
            provenance=self.provenance,
            reporter=Reporter(
                functools.partial(self._report, index), self.clock, attempt, undo=undo
            ),
        )

    async def _report(self, index: int, record: dict[str, Any]) -> None:
        """Keep a call's progress report on step ``index``; one the ledger cannot keep now is
        dropped (the call goes on), one refused because the lease was taken over is not."""
        try:
            if self.options.report is not None:
                await self.options.report(index, record)
            elif not await self.store.record_progress(
                self.state.saga_id, index, record, epoch=self.epoch
            ):
                raise LeaseLost(f"lease on saga {self.state.saga_id} was taken over")
        except LeaseLost:
            raise
        except StoreError as exc:
            log.warning("progress of saga %s step %d dropped: %s", self.state.saga_id, index, exc)
        if not record.get("undo"):
            await self._unless_aborted(index)

    async def _unless_aborted(self, index: int) -> None:
        """At a progress report of a compensable step's action: ``Cancelled`` when the saga
        was aborted meanwhile (it compensates in the ledger), so the call stops there
        rather than run to its end; its undo follows at once."""
        if self.state.steps[index].kind != _COMPENSABLE:
            return
        try:
            stored = await self.store.load(self.state.saga_id)
        except StoreError:
            return  # not known: the call goes on
        if stored is not None and stored.state.status is SagaStatus.COMPENSATING:
            raise Cancelled(f"the saga was aborted: {stored.state.reason}")

    def _call(self, ctx: StepContext, *, undo: bool = False) -> Call:
        return Call(
            saga_id=ctx.saga_id,
            catalogue=self.state.catalogue,
            step=ctx.step,
            index=ctx.index,
            key=ctx.key,
            attempt=ctx.attempt,
            undo=undo,
            traceparent=self.state.traceparent,
        )

    async def _hook(self, point: Point, index: int) -> None:
        if self.options.hook is not None:
            paused = self.options.hook(point, index)
            if paused is not None:  # a hook that pauses the process for a while
                await paused

    async def _wait_until(self, when: float | None) -> None:
        if when is None or when <= self.clock.now():
            return
        if when - self.clock.now() > self.options.max_inline_wait or self.options.should_stop():
            raise Suspended(f"next attempt due at {when:.3f}")
        await self.clock.sleep(when - self.clock.now())

    @staticmethod
    async def _bounded(call: Awaitable[Any], limit: float) -> Any:
        """``call``, abandoned (``Abandoned``) once ``limit`` seconds have passed: one timer
        handle on the loop (``asyncio.timeout``'s context manager costs several times that
        on every call, and nearly every call ends in time)."""
        task = asyncio.current_task()
        assert task is not None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        handle = asyncio.get_running_loop().call_later(limit, expire)
        try:
            return await call
        except asyncio.CancelledError:
            if expired and task.uncancel() == 0:  # our bound, not a cancellation from outside
                raise Abandoned(f"no outcome within {limit:g}s: the call was abandoned") from None
            raise
        finally:
            handle.cancel()

    async def _lookup(self, index: int, attempt: int) -> tuple[Found, Any]:
        """What the step's lookup answers about its action's key, and the result found."""
        step = self.step_of(index)
        if step.lookup is None:
            return Found.NO_LOOKUP, None
        try:
            found = await self._bounded(
                step.lookup(self.args_of(index), self.context(index, attempt)), self._limit(step)
            )
        except Exception:
            return Found.CANNOT_TELL, None
        if found is None:
            return Found.NOT_FOUND, None
        return Found.FOUND, jsonable(found)

    async def _intent(
        self, index: int, ctx: StepContext, *, undo: bool = False, settle: bool = False
    ) -> float:
        """Write the intent of the call ``ctx`` stands for, of the action or of its undo, and
        return its ``not_after``: no call of this attempt starts later. The lease is checked
        before the intent and again after it; the deadline recorded with the intent is
        ``not_after`` plus the catalogue's ``doubt_grace``, plus how far two processes'
        readings of the ledger's time may disagree; the intent is recorded at the
        same reading of the clock that ``not_after`` counts from. Every call begins here."""
        await self._hook(Point.BEFORE_UNDO_INTENT if undo else Point.BEFORE_INTENT, index)
        await self._fence()
        now = self.clock.now()
        not_after = now + self._limit(self.step_of(index))
        await self.emit(
            self.event(
                EventType.UNDO_STARTED if undo else EventType.STEP_STARTED,
                index,
                ctx.attempt,
                at=now,
                key=ctx.key,
                by=self.options.owner,
                deadline=not_after + self.catalogue.doubt_grace + self._margin,
                **({"settle": True} if settle else {}),
            )
        )
        await self._hook(Point.AFTER_UNDO_INTENT if undo else Point.AFTER_INTENT, index)
        await self._fence()
        return not_after

    async def _fence(self) -> None:
        """``LeaseLost`` unless the pass still holds its lease (see ``RunOptions``)."""
        if self.options.lease_check is not None:
            await self.options.lease_check()

    @property
    def _margin(self) -> float:
        """How far another process's reading of the ledger's time may be from this one's
        (``clock.ROUND_TRIP`` for the ledger's clock; none for one clock of a test's own)."""
        margin: float = getattr(self.clock, "margin", 0.0)
        return margin

    def _limit(self, step: Step) -> float:
        """How long the next call of ``step`` may take."""
        return self.catalogue.timeout_of(step)
