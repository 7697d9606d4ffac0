"""What is asked before a unit of steps runs: a person's approval at the point of no
return, the plan re-checked against fresh facts, and the holds it needs still in place."""

from __future__ import annotations

from collections.abc import Collection

from pivotal.catalogue import StepKind
from pivotal.engine.journal import Journal
from pivotal.engine.machine import Approval, Do, Facts, Phase, decide
from pivotal.engine.values import describe, describe_value
from pivotal.holds import cover, expiry_cause, moment
from pivotal.identity import identity_of
from pivotal.plan import Plan
from pivotal.policy import DAY, ApprovalRequirement, Window, parsed
from pivotal.state import ApprovalStatus, EventType, SagaState, SagaStatus, StepStatus
from pivotal.validation import Recheck, recheck_bounded


def point_of_no_return(state: SagaState) -> int | None:
    """The pivot's index, else the first retriable step's, else None."""
    for kind in (StepKind.PIVOT.value, StepKind.RETRIABLE.value):
        for r in state.steps:
            if r.kind == kind:
                return r.index
    return None


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
        if index != gate_of(self.state, before) or rec.status is not StepStatus.PENDING:
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
        pnr = point_of_no_return(self.state)
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
        the pivot was called), naming the hold. See ``pivotal.holds``."""
        pnr = point_of_no_return(self.state)
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
        """Ask the catalogue's policy; a policy that fails sends the pivot to a person, and
        so do other sagas' exposure that cannot be read."""
        policy = self.catalogue.approval
        if policy is None:
            return None
        args = self._args_or_error(index)
        if isinstance(args, str):
            return None  # the step records the failure without calling anything
        name = self.state.steps[index].name
        across: Window | None = getattr(policy, "across", None)
        prior: list[Plan] = []
        if across is not None:
            if self._creating is not None:  # in the ledger first: see ``_prior``
                await self.flush()
            try:
                found = await self._prior(across)
            except Exception as exc:
                return ApprovalRequirement(
                    f"what other sagas for the same {across.by} expose could not be read "
                    f"({describe(exc)}): a person must decide",
                    DAY,
                )
            if found is None:
                return ApprovalRequirement(
                    f"more than {across.limit} other sagas for the same {across.by} are in "
                    "flight or recent: a person must decide",
                    DAY,
                )
            prior = found
        try:
            plan = parsed(self.plan, self.catalogue)  # defaults count: never the text alone
            if across is not None:
                need = policy(name, args, plan, prior=prior)  # type: ignore[call-arg]
            else:
                need = policy(name, args, plan)
            if need is not None and not isinstance(need, ApprovalRequirement):
                raise TypeError(f"the policy returned {describe_value(need)}")
            if need is not None:
                float(need.expires_in)
        except Exception as exc:
            return ApprovalRequirement(
                f"the approval policy failed on {name} ({describe(exc)}): a person must decide",
                DAY,
            )
        return need

    async def _prior(self, across: Window) -> list[Plan] | None:
        """The plans of the other sagas ``across`` covers: naming one of the ids this plan
        names as ``across.by``, still going or ended within its window, not compensated;
        None when there are more than its limit. The caller creates this saga first, so
        that of two sagas for one order checked at once, the later sees the earlier."""
        ids: set[str] = set()
        for i, r in enumerate(self.state.steps):
            value = self._raw_args[i].get(across.by)
            if isinstance(value, str):
                fields = self.catalogue[r.name].args_model.model_fields
                identity = identity_of(fields.get(across.by))
                ids.add(identity.canonical(value) if identity is not None else value)
        since = self.clock.now() - across.seconds
        found: dict[str, Plan] = {}
        for value in sorted(ids):
            related = await self.store.sagas_naming(across.by, value, since, across.limit + 2)
            others = [r for r in related if r.saga_id != self.state.saga_id]
            if len(others) > across.limit:
                return None
            for other in others:
                if other.status is not SagaStatus.COMPENSATED:
                    same = other.plan.catalogue == self.catalogue.name
                    found[other.saga_id] = (
                        parsed(other.plan, self.catalogue) if same else other.plan
                    )
        return list(found.values())
