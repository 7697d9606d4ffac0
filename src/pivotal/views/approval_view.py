"""What an approver is shown about a pivot waiting for them, built once for every surface
(the approval page and ``GET /v1/approvals``):

* ``request_text``: the request the plan was made from, when a planning run recorded it
  (bounded, its control characters and bidi overrides shown escaped: text, never markup);
* ``amount`` and ``currency``: what the gated step moves, from its argument declared
  ``MONEY`` and its currency argument (else the trusted ``currency`` fact); ``headline``
  puts them together ("EUR 180.00");
* ``checks``: what was checked, and how it went: the plan validated against the trusted
  facts at submission, each plan rule by name, the rules that bind each money and entity
  argument of the gated step, and (while it waits) the plan against the facts as they are
  now.

A saga is linked to its request by its planning run, and only when both sides agree: the
plan's ``provenance.run_id`` names the run, and the run (written by the planning loop, never
by a submitter) names this saga, or the escalation of that run was settled with it. A plan
that merely claims someone else's run shows no request."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from pivotal.admission.validation import (
    FactSource,
    FactsUnanswered,
    Recheck,
    Rechecked,
    on_facts_thread,
    plan_context,
    recheck_bounded,
)
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.identity import ArgKind, identity_of, kind_of
from pivotal.declarations.plan_view import PlanView
from pivotal.sagas.state import ApprovalStatus
from pivotal.store.base import Store, StoredSaga
from pivotal.terminal import printable

MAX_REQUEST = 2000  # characters of the request shown

PASSED, FAILED, UNKNOWN = "passed", "failed", "unknown"


@dataclass(frozen=True, slots=True)
class Check:
    """One thing checked: what (``check``, in words), how it went (``status``: passed,
    failed or unknown), more on it (``detail``), of what kind (``kind``: submission, rule,
    binding or now) and, for a rule, its ``name``."""

    kind: str
    check: str
    status: str
    detail: str = ""
    name: str = ""  # a rule's name (its class)


@dataclass(frozen=True, slots=True)
class ApprovalFacts:
    request_text: str | None
    amount: str | None
    currency: str | None
    argument: str | None  # the money argument the amount is from
    checks: tuple[Check, ...] = field(default_factory=tuple)
    holds_now: str | None = None  # the re-check now, in words (None: not asked)

    @property
    def headline(self) -> str | None:
        if self.amount is None:
            return None
        return f"{self.currency} {self.amount}" if self.currency else self.amount

    def fields(self) -> dict[str, Any]:
        """What the API carries: request_text, amount, currency, headline, checks."""
        return {
            "request_text": self.request_text,
            "amount": self.amount,
            "currency": self.currency,
            "headline": self.headline,
            "checks": [asdict(c) for c in self.checks],
        }


# -- the request ---------------------------------------------------------------------------


def shown_request(text: str) -> str:
    """The request as text for a person: at most ``MAX_REQUEST`` characters, control and
    invisible format characters escaped (newlines kept)."""
    cut = text if len(text) <= MAX_REQUEST else text[: MAX_REQUEST - 1] + "…"
    return printable(cut, newlines=True)


async def requests_of(store: Store, sagas: Iterable[StoredSaga]) -> dict[str, str]:
    """saga id -> the text of the request its plan was made from, for those whose planning
    run recorded one and names the saga (see the module's docstring): each run read by its
    id, whatever the number of runs in the ledger."""
    found: dict[str, str] = {}
    for stored in sagas:
        saga_id, run_id = stored.state.saga_id, stored.plan.provenance.run_id
        if not run_id:
            continue
        run = await store.run(run_id)
        if run is None:
            continue
        if run.saga_id == saga_id:
            found[saga_id] = run.request.text
            continue
        settled = await store.escalation_of_run(run_id)  # a person settled it with a plan
        if settled is not None and settled.saga_id == saga_id:
            found[saga_id] = run.request.text
    return {saga: shown_request(text) for saga, text in found.items() if text.strip()}


async def request_of(store: Store, stored: StoredSaga) -> str | None:
    return (await requests_of(store, [stored])).get(stored.state.saga_id)


# -- the amount ----------------------------------------------------------------------------


def _amount(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= -2:
        number = number.quantize(Decimal("0.01"))  # 180 -> 180.00
    return f"{number:f}"


async def _currency_fact(
    stored: StoredSaga, catalogue: Catalogue, facts: FactSource | None
) -> str | None:
    """The trusted ``currency`` fact of the plan's subject, asked on a facts thread and
    bounded (None: no facts, they raised, or they did not answer in time)."""
    if facts is None:
        return None

    def ask() -> object:
        try:
            return dict(facts(plan_context(stored.plan, catalogue))).get("currency")
        except Exception:  # facts that cannot be read give no currency
            return None

    try:
        fact = await on_facts_thread(ask, catalogue.default_timeout)
    except FactsUnanswered:
        return None
    return str(fact) if fact not in (None, "") else None


async def money_of(
    stored: StoredSaga, catalogue: Catalogue, facts: FactSource | None
) -> tuple[str | None, str | None, str | None]:
    """(amount, currency, the money argument) of the step the approval gates."""
    a = stored.state.approval
    view = PlanView.of(stored.plan, None, models=_models(catalogue))
    if a is None or a.step >= len(view.calls):
        return None, None, None
    call = view.calls[a.step]
    fields = call.model.model_fields if call.model is not None else {}
    money = [n for n, f in fields.items() if kind_of(f) is ArgKind.MONEY]
    if not money:
        return None, None, None
    amount = _amount(call.value(money[0]))
    currency = None
    for name, info in fields.items():
        identity = identity_of(info)
        if name == "currency" or (identity is not None and identity.kind == "currency"):
            given = call.value(name)
            currency = str(given) if given not in (None, "") else None
            break
    if currency is None:
        currency = await _currency_fact(stored, catalogue, facts)
    return amount, printable(currency) if currency else None, money[0]


def _models(catalogue: Catalogue) -> dict[str, Any]:
    return {s.name: s.args_model for s in catalogue}


# -- the checks ----------------------------------------------------------------------------


def holds_now(found: Rechecked | None, facts: FactSource | None) -> str:
    """The re-check now, in words, as the page has always said it."""
    if facts is None or found is None:
        return "the app offers no trusted facts to check the plan against"
    if found.verdict is Recheck.HOLDS:
        return "the plan still holds against them"
    if found.verdict is Recheck.CHANGED:
        return (
            f"they changed since the request: {found.describe()}. An approval is refused; "
            "when the saga runs on it compensates"
        )
    return f"they cannot be read now ({found.describe()}): an approval is refused until they can"


_NOW = {Recheck.HOLDS: PASSED, Recheck.CHANGED: FAILED, Recheck.CANNOT_TELL: UNKNOWN}


def checks_of(
    stored: StoredSaga,
    catalogue: Catalogue,
    facts: FactSource | None,
    now: Rechecked | None,
    *,
    pending: bool = True,
) -> tuple[Check, ...]:
    """What was checked: at submission, by each rule, per bound argument, and (while the
    approval is ``pending``) now."""
    against = "the trusted facts" if facts is not None else "the catalogue (no trusted facts)"
    out = [
        Check(
            "submission",
            f"The plan was validated against {against} when it was submitted",
            PASSED,
            "every step, its arguments and every rule below",
        )
    ]
    out += [
        Check("rule", r.describe(), PASSED, "a rule of the catalogue", type(r).__name__)
        for r in catalogue.rules
    ]
    a = stored.state.approval
    calls = stored.plan.calls()
    if a is not None and a.step < len(calls):
        name = calls[a.step].call.name
        step = catalogue.get(name)
        fields = step.args_model.model_fields if step is not None else {}
        for arg, info in fields.items():
            kind = kind_of(info)
            if kind is None:
                continue
            binding = [r.describe() for r in catalogue.rules if r.binds(name, arg)]
            what = "an amount" if kind is ArgKind.MONEY else "an id"
            out.append(
                Check(
                    "binding",
                    f"{arg} ({what}) bound" if binding else f"{arg} ({what}) not bound by a rule",
                    PASSED if binding else UNKNOWN,
                    "; ".join(binding) or "only its schema limits it",
                )
            )
    if pending:
        out.append(
            Check(
                "now",
                "The whole plan, against the trusted facts as they are now",
                _NOW[now.verdict] if now is not None else UNKNOWN,
                holds_now(now, facts),
            )
        )
    return tuple(out)


async def approval_facts(
    stored: StoredSaga,
    catalogue: Catalogue,
    facts: FactSource | None,
    request_text: str | None = None,
) -> ApprovalFacts:
    """The facts of ``stored``'s approval (``request_text`` from ``requests_of``). The plan
    is re-checked against ``facts`` only while the approval is pending, bounded as the
    engine's re-check is (``validation.recheck_bounded``)."""
    a = stored.state.approval
    pending = a is not None and a.status is ApprovalStatus.PENDING
    now = await recheck_bounded(stored.plan, catalogue, facts) if pending and facts else None
    amount, currency, argument = await money_of(stored, catalogue, facts)
    return ApprovalFacts(
        request_text=request_text,
        amount=amount,
        currency=currency,
        argument=argument,
        checks=checks_of(stored, catalogue, facts, now, pending=pending),
        holds_now=holds_now(now, facts) if pending else None,
    )
