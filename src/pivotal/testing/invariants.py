"""Invariants over the ledger and the providers' own state, checked once a run is quiet."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pivotal.declarations.catalogue import StepKind, action_key, undo_key
from pivotal.engine import point_of_no_return
from pivotal.sagas.state import EventType, SagaState, SagaStatus, StepStatus, UndoStatus, replay
from pivotal.store.base import Store
from pivotal.testing.probe import CallProbe, CallSpan, EffectProbe

QUIET = frozenset(
    {
        SagaStatus.COMPLETED,
        SagaStatus.COMPENSATED,
        SagaStatus.COMPENSATION_FAILED,
        SagaStatus.NEEDS_HUMAN,
        SagaStatus.AWAITING_APPROVAL,
    }
)


@dataclass(frozen=True)
class Violation:
    rule: str
    saga_id: str | None
    detail: str

    def __str__(self) -> str:
        where = f"saga {self.saga_id}" if self.saga_id else "providers"
        return f"[{self.rule}] {where}: {self.detail}"


async def check_invariants(
    store: Store, probe: EffectProbe, saga_ids: Iterable[str], calls: Iterable[CallSpan] = ()
) -> list[Violation]:
    """Every broken invariant; an empty list when the world is consistent.

    ``calls`` are spans recorded in front of the providers (see ``CallLog``); a probe that
    is also a ``CallProbe`` adds the providers' own.
    """
    effects = probe.effects()
    out = [
        Violation("effect_once", None, f"key {key} took effect {n} times")
        for key, n in sorted(effects.items())
        if n > 1
    ]
    spans = list(calls) + (list(probe.call_spans()) if isinstance(probe, CallProbe) else [])
    out += concurrent_calls(spans)
    open_letters = {d.undo_key for d in await store.dead_letters("open")}
    for saga_id in saga_ids:
        out += await _check_saga(store, probe, saga_id, effects, open_letters)
    return out


def concurrent_calls(spans: Iterable[CallSpan]) -> list[Violation]:
    """No step called concurrently with itself: two live spans of one key in flight at once.

    A span marked ``stale`` (made by a process that had lost its lease, a zombie whose
    writes the ledger refuses) is not compared: only lease holders must take turns. Spans
    are compared only with spans of the same recorder (their ticks differ).
    """
    out: list[Violation] = []
    by_key: dict[tuple[str, str], list[CallSpan]] = defaultdict(list)
    for span in spans:
        if not span.stale:
            by_key[(span.recorder, span.key)].append(span)
    for (_, key), same in sorted(by_key.items()):
        same.sort(key=lambda s: s.start)
        longest: CallSpan | None = None
        for span in same:
            if longest is not None and longest.end is not None and span.start <= longest.end:
                who = f" ({longest.by} and {span.by})" if span.by else ""
                out.append(
                    Violation(
                        "no_concurrent_calls",
                        None,
                        f"{key} was called while an earlier call of it was in flight{who}",
                    )
                )
            end = span.start if span.end is None else span.end
            if longest is None or longest.end is None or end > longest.end:
                longest = CallSpan(span.key, span.start, end, span.by)
    return out


async def _check_saga(
    store: Store,
    probe: EffectProbe,
    saga_id: str,
    effects: Mapping[str, int],
    open_letters: set[str],
) -> list[Violation]:
    stored = await store.load(saga_id)
    if stored is None:
        return [Violation("exists", saga_id, "no such saga in the ledger")]
    s, events = stored.state, await store.events(saga_id)
    bad: list[Violation] = []

    def fail(rule: str, detail: str) -> None:
        bad.append(Violation(rule, saga_id, detail))

    if s.status not in QUIET:
        fail("quiet", f"status {s.status.value} is not a resting state")
    if not events or replay(events) != s:
        fail("replay", "replaying the event log does not give the stored state")
    started = {e.data.get("key") for e in events if e.type is EventType.STEP_STARTED}
    expected = {action_key(saga_id, r.index) for r in s.steps}
    for key in effects:
        if not key.startswith(f"{saga_id}:"):
            continue
        if key not in expected:
            fail("key_scheme", f"effect made with key {key}, not a step's action key")
        elif key not in started:
            fail("intent_before_effect", f"effect with key {key} has no recorded intent")
    for r in s.steps:
        if r.undo_status is UndoStatus.DEAD_LETTERED and undo_key(saga_id, r.index) not in (
            open_letters
        ):
            fail("dead_letter", f"undo of {r.name} failed but no open dead letter exists")
    if s.status is SagaStatus.COMPENSATION_FAILED and not s.dead_letters:
        fail("dead_letter", "compensation_failed without a dead-lettered undo")
    bad += _by_outcome(
        s, probe, events_have_undo=any(e.type is EventType.UNDO_STARTED for e in events)
    )
    return bad


def _by_outcome(s: SagaState, probe: EffectProbe, *, events_have_undo: bool) -> list[Violation]:
    bad: list[Violation] = []

    def key(index: int) -> str:
        return action_key(s.saga_id, index)

    compensable = [r for r in s.steps if r.kind == StepKind.COMPENSABLE.value]
    pnr = point_of_no_return(s)
    passed = pnr is not None and s.steps[pnr].status is StepStatus.SUCCEEDED
    if s.status is SagaStatus.COMPLETED:
        for r in s.steps:
            if r.status is not StepStatus.SUCCEEDED or not probe.in_place(key(r.index)):
                bad.append(
                    Violation(
                        "completed_effects",
                        s.saga_id,
                        f"{r.name} (step {r.index}) has no effect in place",
                    )
                )
    if s.status is SagaStatus.COMPENSATED:
        for r in compensable:
            if probe.in_place(key(r.index)):
                bad.append(
                    Violation(
                        "compensated_clean",
                        s.saga_id,
                        f"{r.name} (step {r.index}) is still in effect",
                    )
                )
    if s.status is SagaStatus.COMPENSATION_FAILED:
        for r in compensable:
            if r.undo_status is UndoStatus.DONE and probe.in_place(key(r.index)):
                bad.append(
                    Violation(
                        "compensated_clean",
                        s.saga_id,
                        f"{r.name} (step {r.index}) was undone but is in effect",
                    )
                )
    if passed:
        if events_have_undo:
            bad.append(
                Violation(
                    "no_undo_after_pivot",
                    s.saga_id,
                    "an undo ran after the point of no return succeeded",
                )
            )
        for r in compensable:
            if not probe.in_place(key(r.index)):
                bad.append(
                    Violation(
                        "no_undo_after_pivot",
                        s.saga_id,
                        f"{r.name} (step {r.index}) is gone after the pivot",
                    )
                )
    return bad
