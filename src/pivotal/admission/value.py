"""The stages of admission that count value: what a plan moves (stage 4), and what it
exposes with what the ledger holds reserved for the same subjects, as its catalogue's
rollout counts it (stage 5); and the first event of the saga an admitted plan becomes,
with the subjects it names and the value it reserves."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from pivotal.admission.shape import Checked
from pivotal.declarations.catalogue import KIND_TEXT, Catalogue
from pivotal.declarations.exposure import (
    Exposure,
    Moved,
    NoRate,
    Rates,
    Reservations,
    TooMany,
    moved_by,
    reserved_by_others,
)
from pivotal.declarations.exposure import subject_kind as kind_named_by
from pivotal.declarations.identity import identity_of
from pivotal.declarations.plan import FlatCall, Plan
from pivotal.declarations.policy import Rollout
from pivotal.sagas.state import Event, EventType


class Ledger(Reservations, Protocol):
    """The reads admission may make of the ledger (a ``Store`` makes them): what is
    reserved for a subject, and whether a saga of an id is recorded."""

    async def load(self, saga_id: str) -> object | None: ...


def moved(found: Checked, catalogue: Catalogue) -> tuple[Moved, ...]:
    """Stage 4: the value each call of a step that declares ``moves`` moves, from its
    arguments as parsed (defaults filled in), in the step's currency. An amount is at least
    0 unless the step declares it signed; what is counted is what leaves
    (``exposure.outgoing``), never netted against what comes back."""
    return tuple(moved_by(found.calls, catalogue, found.args))


@dataclass(frozen=True)
class Counted:
    """What a rollout counted of an agent plan: ``amount`` (None: it cannot be counted,
    ``why`` says so) against the rollout's ``limit``."""

    amount: Decimal | None
    limit: Decimal
    setting: str  # the rollout, described
    why: str  # for a person: what was measured

    @property
    def below(self) -> bool:
        return self.amount is not None and self.amount < self.limit

    @property
    def text(self) -> str:
        return "uncountable" if self.amount is None else f"{self.amount:f}"


async def exposure(
    rollout: Rollout,
    catalogue: Catalogue,
    value: tuple[Moved, ...],
    saga_id: str,
    now: float,
    rates: Rates,
    ledger: Reservations,
) -> Counted:
    """Stage 5: what the plan exposes (its own value, with what other sagas hold reserved
    for the subjects it names over the rollout's window), in the rollout's currency. A
    saga racing this one may not be in the ledger yet: the gate reads the reservations
    again once this saga is (``Gates``)."""
    setting = rollout.describe()
    where = f"for the rollout of catalogue {catalogue.name!r} ({setting})"
    try:
        prior = await _reserved(rollout, catalogue, value, saga_id, now, ledger)
        amount = rollout.measure(Exposure(value, prior, rates), catalogue)
    except (NoRate, TooMany) as exc:
        why = f"what the plan exposes cannot be counted ({exc}) {where}"
        return Counted(None, rollout.execute_below, setting, why)
    why = (
        f"the plan exposes {amount:f}, not below the rollout limit "
        f"{rollout.execute_below:f} of catalogue {catalogue.name!r} ({setting})"
    )
    return Counted(amount, rollout.execute_below, setting, why)


async def _reserved(
    rollout: Rollout,
    catalogue: Catalogue,
    value: tuple[Moved, ...],
    saga_id: str,
    now: float,
    ledger: Reservations,
) -> tuple[Moved, ...]:
    """What other sagas hold reserved for the subjects ``value`` names, over the rollout's
    window (nothing without one)."""
    window = rollout.window_for(catalogue)
    kind = kind_named_by(catalogue, window.by) if window is not None else None
    if window is None or kind is None:
        return ()
    since = now - window.seconds
    return await reserved_by_others(ledger, value, kind, since, window.limit, saga_id)


def submitted(
    plan: Plan,
    catalogue: Catalogue,
    found: Checked,
    value: tuple[Moved, ...],
    saga_id: str,
    now: float,
    made: tuple[str, str, dict[str, str]],
) -> Event:
    """The first event of the saga ``plan`` becomes: its steps, the subjects it names and
    the value it reserves, as the stages found them; ``made``: the plan's digest, its
    catalogue's build and the saga's trace context."""
    digest, build, trace = made
    return Event(
        type=EventType.SAGA_SUBMITTED,
        at=now,
        seq=1,
        data={
            "saga_id": saga_id,
            "catalogue": plan.catalogue,
            "plan_digest": digest,
            # the build of the catalogue it was planned against (for display; what
            # decides whether a process can run it is ``steps``: ``serving.unserved``)
            "catalogue_digest": build,
            "provenance_ref": plan.provenance.ref(),
            "rationale": plan.rationale,
            **trace,
            "steps": [
                {
                    "name": f.call.name,
                    "kind": KIND_TEXT[catalogue[f.call.name].kind],
                    "group": f.group,
                }
                for f in found.calls
            ],
            **subjects(catalogue, found.calls),
            **({"reserves": [m.to_json() for m in value]} if value else {}),
        },
    )


def subjects(catalogue: Catalogue, calls: list[FlatCall]) -> dict[str, dict[str, list[str]]]:
    """``{"subjects": {argument: [canonical ids]}}``: the entities the plan names, which
    the ledger indexes (for exposure across sagas); nothing when it names none."""
    named: dict[str, set[str]] = {}
    for flat in calls:
        fields = catalogue[flat.call.name].args_model.model_fields
        for name, arg in flat.call.args.items():
            identity = identity_of(fields.get(name))
            if identity is not None and isinstance(arg, str):
                named.setdefault(name, set()).add(identity.canonical(arg))
    if not named:
        return {}
    return {"subjects": {name: sorted(values) for name, values in sorted(named.items())}}
