"""Value as a declared quantity: which steps move money, how much, in which currency, for
whom; and what a plan moves, counted in one currency.

A step that moves value says so when it is declared::

    @payments.pivot(moves=Moves("amount", currency_arg="currency", per=("order_id",)))
    async def capture(args: Payment, ctx: StepContext) -> dict[str, Any]: ...

``amount`` names an argument declared as money (``Annotated[Decimal, MONEY]``); its
currency is another argument naming one (``currency_arg``, an entity argument of kind
currency) or fixed (``currency="EUR"``); ``per`` names the entity arguments (the order, the
customer) it moves value for. The amounts are read from the call's arguments as its model
parses them, defaults filled in, never from the text a planner wrote.

A policy counts in its own currency: amounts in another are converted by the ``Rates``
the app provides. An amount without a rate is never counted as nothing: ``NoRate`` is
raised, and the plan goes to a person (or the rollout holds it back).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from pivotal.declarations.identity import ArgKind, finite_decimal, identity_of, kind_of
from pivotal.errors import CatalogueError, PivotalError
from pivotal.sagas.state import SagaStatus, StepStatus, UndoStatus

if TYPE_CHECKING:
    from pivotal.declarations.plan import FlatCall
    from pivotal.store.base import Reservation

_CODE = re.compile(r"^[A-Z]{3}$")


def check_currency(code: str, what: str) -> str:
    if not isinstance(code, str) or not _CODE.match(code):
        raise CatalogueError(
            f"{what}: a currency is three capital letters (ISO 4217), not {code!r}"
        )
    return code


@dataclass(frozen=True, slots=True)
class Moves:
    """What value a step moves: the money argument ``amount``, in the currency named by the
    argument ``currency_arg`` or the fixed ``currency`` (exactly one of the two), for each
    subject named by an entity argument in ``per``. Checked against the step's argument
    model when the step is declared."""

    amount: str = "amount"
    per: tuple[str, ...] | str = ("order_id",)
    currency: str | None = None
    currency_arg: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.per, str):
            object.__setattr__(self, "per", (self.per,))
        if not self.per:
            raise CatalogueError("moves: per names at least one subject (an entity argument)")
        if (self.currency is None) == (self.currency_arg is None):
            raise CatalogueError(
                "moves: give the currency either as an argument (currency_arg=) or fixed "
                "(currency=), exactly one of the two"
            )
        if self.currency is not None:
            check_currency(self.currency, "moves")

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.per if isinstance(self.per, tuple) else (self.per,)

    def check(self, step: str, model: type[BaseModel]) -> None:
        """Refuse a declaration that names what the step's arguments do not declare."""
        fields = model.model_fields
        where = f"step {step!r}: moves"
        if kind_of(fields.get(self.amount)) is not ArgKind.MONEY:
            raise CatalogueError(
                f"{where} names {self.amount!r} as its amount, which is not an argument "
                "declared as money (Annotated[Decimal, MONEY])"
            )
        if self.currency_arg is not None:
            identity = identity_of(fields.get(self.currency_arg))
            if identity is None or identity.kind != "currency":
                raise CatalogueError(
                    f"{where} names {self.currency_arg!r} as its currency, which is not an "
                    "argument naming a currency (pivotal.declarations.identity.Currency)"
                )
        for name in self.subjects:
            identity = identity_of(fields.get(name))
            if identity is None:
                raise CatalogueError(
                    f"{where} per {name!r}, which is not an argument naming an entity (an "
                    "order, a customer: declared with an Identity, e.g. OrderId)"
                )
            if not identity.names_subject:
                raise CatalogueError(
                    f"{where} per {name!r}, which names a {identity.kind}: value is moved for "
                    "whom a request is about (an order, a customer), never for a "
                    f"{identity.kind}"
                )

    def kind_of(self, model: type[BaseModel], name: str) -> str:
        identity = identity_of(model.model_fields.get(name))
        return identity.kind if identity is not None else name


@dataclass(frozen=True, slots=True)
class Moved:
    """Value one call moves, or one reservation of another saga in the ledger: ``amount``
    in ``currency``, for each (entity kind, canonical id) of ``subjects``."""

    index: int
    step: str
    amount: Decimal
    currency: str
    subjects: tuple[tuple[str, str], ...]
    saga_id: str | None = None  # another saga's reservation; None: this plan's own call

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.index,
            "name": self.step,
            "amount": f"{self.amount:f}",
            "currency": self.currency,
            "per": [list(s) for s in self.subjects],
        }


class NoRate(PivotalError):
    """An amount is in a currency the app's rates cannot convert."""

    code = "no_rate"


@dataclass(frozen=True)
class Rates:
    """Exchange rates the app provides: ``Rates({("USD", "EUR"): Decimal("0.92")})`` says
    one USD is worth 0.92 EUR (the reverse is derived). A currency converts to itself; any
    other pair without a rate raises ``NoRate``: nothing is counted as 0."""

    table: Mapping[tuple[str, str], Decimal] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked: dict[tuple[str, str], Decimal] = {}
        for (source, target), rate in dict(self.table).items():
            check_currency(source, "rates")
            check_currency(target, "rates")
            value = finite_decimal(rate)
            if value is None or value <= 0:
                raise CatalogueError(f"rates: {source}->{target} must be a positive number")
            checked[(source, target)] = value
        object.__setattr__(self, "table", checked)

    def convert(self, amount: Decimal, source: str, target: str) -> Decimal:
        if source == target:
            return amount
        rate = self.table.get((source, target))
        if rate is not None:
            return amount * rate
        back = self.table.get((target, source))
        if back is not None:
            return amount / back
        raise NoRate(f"no rate from {source} to {target}: {amount:f} {source} cannot be counted")


NO_RATES = Rates()


def moved_by(
    calls: Sequence[FlatCall], catalogue: Any, parsed: Sequence[BaseModel | None] = ()
) -> list[Moved]:
    """The value each call of a step that declares ``moves`` moves, read from its arguments
    as parsed (``parsed[i]`` when given, else parsed here), defaults filled in. A call whose
    arguments do not parse moves nothing here: such a plan never validates."""
    found: list[Moved] = []
    for n, flat in enumerate(calls):
        step = catalogue.get(flat.call.name) if flat.call.name in catalogue else None
        moves: Moves | None = getattr(step, "moves", None)
        if step is None or moves is None:
            continue
        args = parsed[n] if n < len(parsed) else None
        if args is None:
            try:
                args = step.parse_args(flat.call.args)
            except Exception:
                continue
        found.append(_moved(flat.index, step.name, moves, args))
    return found


def _moved(index: int, step: str, moves: Moves, args: BaseModel) -> Moved:
    amount = finite_decimal(getattr(args, moves.amount, None))
    currency = moves.currency or str(getattr(args, moves.currency_arg or "", ""))
    model = type(args)
    subjects: list[tuple[str, str]] = []
    for name in moves.subjects:
        value = getattr(args, name, None)
        identity = identity_of(model.model_fields.get(name))
        if isinstance(value, str) and identity is not None:
            subjects.append((identity.kind, identity.canonical(value)))
    return Moved(index, step, outgoing(amount), currency, tuple(subjects))


def outgoing(amount: Decimal | None) -> Decimal:
    """What an amount moves out, the one figure counted: never below 0, so nothing that
    comes back (a signed amount below 0, or one a ledger kept from before amounts were
    refused below 0) is netted against what goes out, within a plan or across sagas."""
    return amount if amount is not None and amount > 0 else Decimal(0)


@dataclass(frozen=True)
class Exposure:
    """What a policy is given to weigh: the value this plan moves (``moved``), what other
    sagas reserved for the same subjects over the policy's window (``prior``), and the
    app's ``rates``."""

    moved: tuple[Moved, ...] = ()
    prior: tuple[Moved, ...] = ()
    rates: Rates = NO_RATES

    def own(self, currency: str, steps: Iterable[str] | None = None) -> Decimal:
        """This plan's value at ``steps`` (every declared step when None), in ``currency``."""
        names = None if steps is None else frozenset(steps)
        return sum(
            (
                self.rates.convert(outgoing(m.amount), m.currency, currency)
                for m in self.moved
                if names is None or m.step in names
            ),
            Decimal(0),
        )

    def others(self, currency: str) -> Decimal:
        """What the other sagas reserved, in ``currency``."""
        return sum(
            (self.rates.convert(outgoing(m.amount), m.currency, currency) for m in self.prior),
            Decimal(0),
        )

    @property
    def other_sagas(self) -> int:
        return len({m.saga_id for m in self.prior})


# -- the reservations in the ledger --------------------------------------------------------

_MAY_STILL_RUN = frozenset(
    {
        SagaStatus.SUBMITTED,
        SagaStatus.RUNNING,
        SagaStatus.AWAITING_APPROVAL,
        SagaStatus.NEEDS_HUMAN,
    }
)


def still_reserved(saga: SagaStatus, step: StepStatus, undo: UndoStatus) -> bool:
    """Whether a reservation still holds, from what became of the step that moves it: only
    what reversed it releases it. A full undo (or a hold that lapsed on its own) releases
    it; a ``Partial`` undo, one dead-lettered or settled by hand keeps it, all of it (the
    ledger cannot tell how much stayed). A step that took no effect (failed) releases it,
    and so does one never begun in a saga that will not run it any more; a step in flight,
    in doubt, or done holds it. In a saga a person resolved (settled outside), every step
    but one reversed holds it: the ledger cannot tell what the person moved."""
    if undo in (UndoStatus.DONE, UndoStatus.LAPSED):
        return False
    if saga is SagaStatus.RESOLVED:
        return True
    if step is StepStatus.FAILED:
        return False
    if step is StepStatus.PENDING:
        return saga in _MAY_STILL_RUN
    return True


def subject_kind(catalogue: Any, argument: str) -> str | None:
    """The entity kind (``"order"``) that the argument ``argument`` of the catalogue's
    value-moving steps names, or None."""
    for step in catalogue:
        moves: Moves | None = getattr(step, "moves", None)
        if moves is not None and argument in moves.subjects:
            identity = identity_of(step.args_model.model_fields.get(argument))
            if identity is not None:
                return identity.kind
    return None


class TooMany(Exception):
    """More reservations than a window counts: a person decides."""


class Reservations(Protocol):
    """The one read of the ledger exposure makes (a ``Store`` makes it)."""

    async def reservations(
        self, subject: str, value: str, since: float, limit: int
    ) -> list[Reservation]: ...


async def reserved_by_others(
    store: Reservations,
    moved: Iterable[Moved],
    kind: str,
    since: float,
    limit: int,
    saga_id: str | None,
) -> tuple[Moved, ...]:
    """What sagas other than ``saga_id`` hold reserved for the subjects of kind ``kind``
    that ``moved`` names, over the window since ``since``, as ``Moved`` of those sagas;
    ``TooMany`` when more than ``limit`` reservations are found for one subject."""
    ids = sorted({value for m in moved for k, value in m.subjects if k == kind})
    found: dict[tuple[str, int], Moved] = {}
    for value in ids:
        rows = await store.reservations(kind, value, since, limit + 2)
        others = [r for r in rows if r.saga_id != saga_id]
        if len(others) > limit:
            raise TooMany(f"more than {limit} reservations for {kind} {value}")
        for r in others:
            if r.held:
                found[(r.saga_id, r.index)] = Moved(
                    r.index, r.step, r.amount, r.currency, ((kind, value),), r.saga_id
                )
    return tuple(found.values())
