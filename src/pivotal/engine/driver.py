"""The saga state machine: drives one saga from its ledger state. No SQL here.

``Driver`` is composed of its parts: ``journal`` (its state and the ledger), ``calls``
(into a step's code), ``gates`` (before a unit runs), ``forward`` (a step to its outcome)
and ``backward`` (compensation and dead letters); the loop that drives them is here."""

from __future__ import annotations

import asyncio
import contextlib

from pivotal.engine.backward import Backward
from pivotal.engine.gates import Gates
from pivotal.engine.journal import Suspended
from pivotal.engine.machine import Do, Facts, Outcome, Phase, decide
from pivotal.errors import VersionConflict
from pivotal.hooks import Point
from pivotal.sagas.state import EventType, SagaState, SagaStatus, StepStatus

__all__ = ["Driver"]


_MAX_RELOADS = 5  # version conflicts (a decision written meanwhile) one pass absorbs


class Driver(Backward, Gates):
    """One pass of one saga under a lease ``epoch`` (None: fenced by version only)."""

    __slots__ = ()

    # -- the loop -----------------------------------------------------------------------

    async def drive(self) -> SagaState:
        """Advance the saga until it ends, waits for a person, or the pass is suspended
        (a retry not yet due, or the worker stopping): its state so far is committed.

        A version conflict (a decision written meanwhile) starts over from the ledger."""
        conflicts = 0
        with self.telemetry.saga_pass(self.state, self.options.owner):
            while True:
                try:
                    try:
                        return await self._drive()
                    except Suspended:
                        await self.flush()
                        return self.state
                    except VersionConflict:
                        raise
                    except Exception:  # keep an outcome held back for the next commit
                        with contextlib.suppress(Exception):
                            await self.flush()
                        raise
                except VersionConflict:
                    conflicts += 1
                    if conflicts > _MAX_RELOADS:
                        raise
                    await self._reload()

    async def park(self, reason: str) -> SagaState:
        """Stop the saga for a person (a poison saga): ``needs_human`` with the reason."""
        if not self.state.status.terminal:
            await self.emit(self.event(EventType.SAGA_NEEDS_HUMAN, reason=reason, poison=True))
        return self.state

    async def _drive(self) -> SagaState:
        while True:
            if self.options.should_stop() and not self.state.status.terminal:
                raise Suspended("the worker is stopping")
            s = self.state
            if s.status.terminal:
                await self.flush()
                return self.state
            if s.status is SagaStatus.COMPENSATING:
                await self.compensate()
                continue
            unit = self._next_unit()
            if unit is None:
                await self.emit(self.event(EventType.SAGA_COMPLETED, reason=None))
                continue
            if not await self._gate(unit[0]):
                if self.state.status is SagaStatus.AWAITING_APPROVAL:
                    await self.flush()
                    await self._hook(Point.AWAITING_APPROVAL, unit[0])
                    return self.state
                continue
            if not await self._still_holds(unit) or not await self._held(unit):
                continue
            if self.state.approval is not None and not await self._gate(unit[0]):
                continue  # the approval expired while the plan was re-checked
            if len(unit) == 1:
                await self.execute(unit[0])
            else:
                await self._together(unit)
            await self._after(unit)

    async def _together(self, unit: list[int]) -> None:
        """Run a parallel group: every member to its outcome. A crash, a lost lease or a
        failed commit in one member ends the pass and cancels the others; the next pass
        settles what they left in doubt from the ledger."""
        tasks = [asyncio.ensure_future(self.execute(i)) for i in unit]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            if any(_fatal(t) for t in done):
                for t in pending:
                    t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        errors = [e for t in tasks if not t.cancelled() and (e := t.exception()) is not None]
        fatal = [e for e in errors if not isinstance(e, Suspended)]
        if errors:  # a crash, a lost lease or a failed write wins over a suspension
            raise (fatal or errors)[0]

    def _next_unit(self) -> list[int] | None:
        first = next((r for r in self.state.steps if r.status is not StepStatus.SUCCEEDED), None)
        if first is None:
            return None
        if first.group is None:
            return [first.index]
        return [r.index for r in self.state.steps if r.group == first.group]

    async def _after(self, unit: list[int]) -> None:
        bad = [
            self.state.steps[i]
            for i in unit
            if self.state.steps[i].status in (StepStatus.FAILED, StepStatus.UNKNOWN)
        ]
        if not bad:
            return
        r = bad[0]
        pnr = self.no_return
        facts = Facts(
            passed_pivot=pnr is not None and self.state.steps[pnr].status is StepStatus.SUCCEEDED,
            is_pivot=r.index == pnr,
        )
        seen = Outcome.UNKNOWN if r.status is StepStatus.UNKNOWN else Outcome.FAILED
        if decide(Phase.UNIT_ENDED, seen, facts).do is Do.NEEDS_HUMAN:
            if facts.passed_pivot:
                reason = f"{r.name} (step {r.index}) failed after the point of no return: {r.error}"
            else:
                reason = f"outcome of the point-of-no-return step {r.name} is unknown: {r.error}"
            await self.emit(self.event(EventType.SAGA_NEEDS_HUMAN, reason=reason))
        else:
            reason = f"{r.name} (step {r.index}) {r.status.value}: {r.error}"
            await self.emit(self.event(EventType.COMPENSATION_STARTED, reason=reason))


def _fatal(task: asyncio.Future[None]) -> bool:
    """A member that ended the pass: crashed, lost its lease or failed a write."""
    if task.cancelled():
        return False
    error = task.exception()
    return error is not None and not isinstance(error, Suspended)
