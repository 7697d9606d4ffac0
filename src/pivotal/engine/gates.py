"""What is asked before a unit of steps runs: a person's approval at the point of no
return, the plan re-checked against fresh facts, and the holds it needs still in place."""

from __future__ import annotations

from collections.abc import Collection

from pivotal.admission.validation import Recheck, recheck_bounded
from pivotal.declarations.exposure import (
    Exposure,
    NoRate,
    TooMany,
    moved_by,
    reserved_by_others,
    subject_kind,
)
from pivotal.declarations.holds import cover, expiry_cause
from pivotal.declarations.plan import ActorType
from pivotal.declarations.policy import DAY, ApprovalRequirement, Window
from pivotal.engine.journal import Journal, point_of_no_return
from pivotal.engine.machine import Approval, Do, Facts, Phase, decide
from pivotal.engine.values import describe, describe_value
from pivotal.moments import moment
from pivotal.sagas.state import ApprovalStatus, EventType, SagaState, StepStatus


def gate_of(state: SagaState, before: Collection[str] = ()) -> int | None:
    """Where a person's approval is asked: at the point of no return, or before the first
    call of a step in ``before`` when that comes earlier (a parallel group is asked before
    its first member)."""
    pnr = point_of_no_return(state)
    early = next((r for r in state.steps if r.name in before), None)
    if early is None or (pnr is not None and early.index >= pnr):
        return pnr
    if early.group is None:
        return early.index
    return next(r.index for r in state.steps if r.group == early.group)


class Gates(Journal):
    """What a pass asks before a unit of steps begins."""

    __slots__ = ()

    async def _gate(self, index: int) -> bool:
        """Approval at the point of no return. True: go on and run the step."""
        rec = self.state.steps[index]
        before = getattr(self.catalogue.approval, "before", ())
        gate = gate_of(self.state, before) if before else self.no_return  # the same, then
        if index != gate or rec.status is not StepStatus.PENDING:
            return True
        approval, now = self.state.approval, self.clock.now()
        need = await self._approval_needed(index) if approval is None else None
        seen = Approval.NONE if approval is None else Approval(approval.status.value)
        facts = Facts(
            needed=need is not None,
            expired=approval is not None and now >= approval.expires_at,
        )
        do = decide(Phase.GATE, seen, facts).do
        if do is Do.GO:
            return True
        if do is Do.ASK and need is not None:
            expires_at, reason = now + need.expires_in, need.reason
            bound = cover(self.state, self.catalogue, index)
            if bound is not None and bound.begin_by < expires_at:
                # no approval outlasts the holds the step needs: the request expires first
                if not await self._covered(index):
                    return False  # too late already: nothing to ask
                expires_at = bound.begin_by
                reason = f"{reason}; decide by {moment(expires_at)}: {bound.describe(rec.name)}"
            await self.emit(
                self.event(
                    EventType.APPROVAL_REQUESTED,
                    step=index,
                    reason=reason,
                    rationale=self.plan.rationale,
                    expires_at=expires_at,
                    required=need.approvers,
                )
            )
        elif do is Do.EXPIRE:
            await self.emit(
                self.event(EventType.APPROVAL_EXPIRED, step=index),
                self.event(
                    EventType.COMPENSATION_STARTED,
                    reason=f"approval for {rec.name} expired before the step ran"
                    + expiry_cause(self.state, self.catalogue),
                ),
            )
        return False  # asked, waiting for a person, expired, or compensating already

    async def _still_holds(self, unit: list[int]) -> bool:
        """Validate the whole plan again against fresh facts (as submission did) before a
        unit that has not begun, when it is the point of no return, the step an approval
        gated, or follows a wait longer than the catalogue's ``recheck_after`` (a retry, a
        worker, a crashed process's lease, a person). False: the saga did not go on; a plan
        that no longer holds compensates with the reason, and facts that cannot be read send
        it to a person (who resumes it once they answer). Past the point of no return
        nothing is undone, so nothing is re-validated: the next step's precondition is
        still asked just before it runs."""
        first = self.state.steps[unit[0]]
        if self._facts is None or any(
            self.state.steps[i].status is not StepStatus.PENDING for i in unit
        ):
            return True
        pnr = self.no_return
        if pnr is not None and first.index > pnr:
            return True
        now, approval = self.clock.now(), self.state.approval
        gated = (
            approval is not None
            and approval.step == first.index
            and approval.status is ApprovalStatus.APPROVED
        )
        since = self._validated_at if self._validated_at is not None else self.state.created_at
        if first.index != pnr and not gated and now - since <= self.catalogue.recheck_after:
            return True
        found = await recheck_bounded(self.plan, self.catalogue, self._facts)
        if found.verdict is Recheck.HOLDS:
            self._validated_at = now
            return True
        where = f"re-checked before {first.name} (step {first.index})"
        if found.verdict is Recheck.CHANGED:
            reason = (
                f"the trusted facts changed since the plan was validated ({where}); it no "
                f"longer holds: {found.describe()}"
            )
            await self.emit(self.event(EventType.COMPENSATION_STARTED, reason=reason))
        else:
            reason = (
                f"the plan could not be re-checked against the trusted facts ({where}): "
                f"{found.describe()}; nothing ran: resume the saga once they can be read"
            )
            await self.emit(self.event(EventType.SAGA_NEEDS_HUMAN, reason=reason))
        return False

    async def _held(self, unit: list[int]) -> bool:
        """Before the point of no return begins: True when every hold made before it is
        certainly in place until its call must end; else the saga compensates (nothing of
        the pivot was called), naming the hold. See ``pivotal.declarations.holds``."""
        pnr = self.no_return
        if pnr not in unit or self.state.steps[pnr].status is not StepStatus.PENDING:
            return True
        return await self._covered(pnr)

    async def _covered(self, index: int) -> bool:
        """True when the holds before step ``index`` cover it if it begins now; else the
        saga compensates before it, naming the hold."""
        bound = cover(self.state, self.catalogue, index)
        if bound is None or self.clock.now() < bound.begin_by:
            return True
        name = self.state.steps[index].name
        reason = f"{name} was not begun: {bound.describe(name)}, and that time has passed"
        await self.emit(self.event(EventType.COMPENSATION_STARTED, reason=reason))
        return False

    async def _approval_needed(self, index: int) -> ApprovalRequirement | None:
        """Ask the catalogue's policy, and for an agent's plan its rollout; a policy that
        fails sends the pivot to a person, and so do reservations that cannot be read and
        amounts without a rate."""
        policy = self.catalogue.approval
        need = await self._rollout_holds()
        if policy is None or need is not None:
            return need
        args = self._args_or_error(index)
        if isinstance(args, str):
            return None  # the step records the failure without calling anything
        name = self.state.steps[index].name
        weighs = hasattr(policy, "across")
        exposure = Exposure(rates=self._rates)
        if weighs:
            found = await self._exposure(getattr(policy, "across", None))
            if isinstance(found, ApprovalRequirement):
                return found
            exposure = found
        try:
            if weighs:
                need = policy(name, args, self.plan, exposure=exposure)  # type: ignore[call-arg]
            else:
                need = policy(name, args, self.plan)
            if need is not None and not isinstance(need, ApprovalRequirement):
                raise TypeError(f"the policy returned {describe_value(need)}")
            if need is not None:
                float(need.expires_in)
        except NoRate as exc:
            return ApprovalRequirement(f"{exc}: a person must decide", DAY)
        except Exception as exc:
            return ApprovalRequirement(
                f"the approval policy failed on {name} ({describe(exc)}): a person must decide",
                DAY,
            )
        return need

    async def _rollout_holds(self) -> ApprovalRequirement | None:
        """For an agent's plan under a rollout: the rollout measured again, now that this
        saga's reservation is in the ledger. Submission measured it before the saga was
        recorded; of two sagas for one subject submitted at once, the later sees the
        earlier here, and a person decides rather than both running."""
        rollout = self.catalogue.rollout
        if rollout is None or self.provenance.actor_type is not ActorType.AGENT:
            return None
        found = await self._exposure(rollout.window_for(self.catalogue))
        if isinstance(found, ApprovalRequirement):
            return found
        try:
            total = rollout.measure(found, self.catalogue)
        except NoRate as exc:
            return ApprovalRequirement(f"{exc}: a person must decide", DAY)
        if total < rollout.execute_below:
            return None
        return ApprovalRequirement(
            "with what other sagas hold reserved for the same subject, the plan exposes more "
            "than the rollout runs unattended: a person must decide",
            DAY,
        )

    async def _exposure(self, across: Window | None) -> Exposure | ApprovalRequirement:
        """What this plan moves (its declared value, parsed and defaulted) and, over
        ``across``, what other sagas of any catalogue hold reserved in the ledger for the
        same subjects; a requirement for a person when the reservations cannot be read, or
        are too many to count."""
        moved = tuple(moved_by(self.plan.calls(), self.catalogue))
        kind = subject_kind(self.catalogue, across.by) if across is not None else None
        if across is None or kind is None:
            return Exposure(moved, (), self._rates)
        if self._creating is not None:  # in the ledger first: the later of two sees both
            await self.flush()
        since = self.clock.now() - across.seconds
        try:
            prior = await reserved_by_others(
                self.store, moved, kind, since, across.limit, self.state.saga_id
            )
        except TooMany:
            return ApprovalRequirement(
                f"more than {across.limit} other sagas for the same {across.by} are in "
                "flight or recent: a person must decide",
                DAY,
            )
        except Exception as exc:
            return ApprovalRequirement(
                f"what other sagas for the same {across.by} expose could not be read "
                f"({describe(exc)}): a person must decide",
                DAY,
            )
        return Exposure(moved, prior, self._rates)
