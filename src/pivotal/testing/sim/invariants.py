"""What must hold once a run has come to rest, checked against the providers' books (the
``Bank``), never against what the ledger believes of them."""

from __future__ import annotations

from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.exposure import still_reserved
from pivotal.sagas.state import SagaState, SagaStatus, UndoStatus, replay
from pivotal.store.base import Store
from pivotal.testing.sim.bank import Bank
from pivotal.testing.sim.providers import PROVIDERS

AT_REST = frozenset(
    {
        SagaStatus.COMPLETED,
        SagaStatus.COMPENSATED,
        SagaStatus.COMPENSATION_FAILED,
        SagaStatus.NEEDS_HUMAN,
        SagaStatus.RESOLVED,
    }
)


async def check(store: Store, bank: Bank, catalogue: Catalogue, sagas: list[str]) -> list[str]:
    """Every broken invariant of the run, as a line each."""
    found = list(bank.violations)
    for key, effect in sorted(bank.effects.items()):
        if effect.pending or effect.pending_undo:
            found.append(f"{key}: a call still lands after the run came to rest")
        if len(effect.made) > 1:
            by = ", ".join(f"{who} at {at:.3f}" for at, who in effect.made)
            found.append(f"{key}: its effect was made {len(effect.made)} times ({by})")
        if effect.net < 0:
            found.append(f"{key}: moved back more often than made ({effect.undone})")
        told = PROVIDERS[effect.step].lookup in ("exact", "lagging") and not effect.lookup_failed
        if effect.undone_nothing and told:
            found.append(
                f"{key}: undone though nothing was made, and its lookup could tell "
                "(never undo a step that never ran)"
            )
    for saga_id in sagas:
        stored = await store.load(saga_id)
        if stored is None:
            continue
        found += _saga(stored.state, bank, catalogue)
        events = await store.events(saga_id)
        again = replay(events)
        if _comparable(again) != _comparable(stored.state):
            found.append(f"saga {saga_id}: its events replay to another state than stored")
    return found


def _comparable(state: SagaState) -> SagaState:
    from dataclasses import replace

    return replace(state, compensating_since=None, traceparent=None)


def _saga(state: SagaState, bank: Bank, catalogue: Catalogue) -> list[str]:
    saga_id, status = state.saga_id, state.status
    if status not in AT_REST:
        return [f"saga {saga_id} is not at rest: {status.value} ({state.reason})"]
    out: list[str] = []
    for r in state.steps:
        effect = bank.effects.get(f"{saga_id}:{r.index}")
        net = effect.net if effect is not None else 0
        where = f"saga {saga_id} ({status.value}) step {r.index} {r.name}"
        if status is SagaStatus.COMPLETED and net != 1:
            out.append(f"{where}: {net} effects in place, not one")
        if status is SagaStatus.COMPENSATED and net != 0:
            out.append(f"{where}: {net} effects left in place")
        parked = r.undo_status is UndoStatus.DEAD_LETTERED
        if status is SagaStatus.COMPENSATION_FAILED and net != 0 and not parked:
            out.append(f"{where}: {net} effects left in place, and no dead letter says so")
        held = still_reserved(status, r.status, r.undo_status)
        if catalogue[r.name].moves is not None and net > 0 and not held:
            out.append(f"{where}: its value is in place but no longer reserved")
    return out
