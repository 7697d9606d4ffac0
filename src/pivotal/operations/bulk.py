"""Acting on every saga a search selects: abort them, run their plans again, or retry their
dead letters; the same for the CLI (``pivotal sagas bulk``), the API (``POST
/v1/sagas/bulk``) and the sagas page.

``select`` walks the search (``Store.search_sagas``, keyset cursor, in the filter's order)
and refuses with ``TooManySagas`` when it holds more than ``MAX_SAGAS``: narrow the filter.
``act`` then acts on each saga in that order through the single-saga functions
(``saga_actions.abort``, ``Orchestrator.rerun``, and for dead letters the API's and the
page's act: due now, for a worker's sweep), so every rule of the single act holds, and
records each outcome: ``acted``, ``already`` (done before: the act is never applied
twice), ``refused`` (with the error code and message of
the single act) or ``not_found``. An interrupted call is finished by calling again: what
was done is ``already`` (or no longer selected), the rest is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from pivotal.errors import InvalidInput, PivotalError, SagaNotFound
from pivotal.orchestration.rerun import rerun_id
from pivotal.people.principals import names_someone
from pivotal.sagas.state import SagaStatus
from pivotal.store.search import MAX_LIMIT, SagaFilter
from pivotal.views import saga_actions

if TYPE_CHECKING:
    from pivotal.orchestration.orchestrator import Orchestrator
    from pivotal.store.base import DeadLetter, Store

MAX_SAGAS = 500  # sagas one bulk act may select; more is refused (narrow the filter)
_PAGE = MAX_SAGAS + 1
_OVER = (SagaStatus.COMPENSATING, SagaStatus.COMPENSATED, SagaStatus.COMPENSATION_FAILED)


NOT_NOTED = "its dead letters are due; who asked is not noted on the saga: it kept changing"


class Act(StrEnum):
    ABORT = "abort"
    RERUN = "rerun"
    RETRY_DEAD_LETTERS = "retry-dead-letters"


class Outcome(StrEnum):
    ACTED = "acted"
    ALREADY = "already"
    REFUSED = "refused"
    NOT_FOUND = "not_found"


class TooManySagas(InvalidInput):
    """The search selects more sagas than one bulk act may act on."""

    code = "too_many_sagas"


@dataclass(frozen=True, slots=True)
class Result:
    """What became of one saga: ``code`` and ``message`` say why it was refused (an act
    done may have a ``message`` too: what of it was not done); ``rerun`` is the id of the
    saga its plan runs again as."""

    saga_id: str
    outcome: Outcome
    code: str | None = None
    message: str | None = None
    rerun: str | None = None


def act_of(given: str) -> Act:
    """The act named ``given``; ``InvalidInput`` naming the acts otherwise."""
    try:
        return Act(given)
    except ValueError:
        acts = ", ".join(a.value for a in Act)
        raise InvalidInput(f"unknown act {given[:40]!r}; acts are: {acts}") from None


def check(act: Act, by: str, reason: str) -> str:
    """The reason, after refusing (``InvalidInput``) what the single act would refuse
    before anything: no person, or for an abort no reason; a reason given (recorded with
    every act) is checked as any (``saga_actions.reason_of``)."""
    if not names_someone(by):
        raise InvalidInput(f"{act.value} of many sagas needs who asked for it")
    if act is Act.ABORT or reason.strip():
        what = "aborting sagas" if act is Act.ABORT else f"{act.value} of many sagas"
        return saga_actions.reason_of(reason, what)
    return ""


async def select(store: Store, wanted: SagaFilter, bound: int | None = None) -> list[str]:
    """The ids of the sagas ``wanted`` keeps, in its order; ``TooManySagas`` (with how many,
    counted up to ``search.MAX_LIMIT``) when there are more than ``bound`` (``MAX_SAGAS``);
    ``InvalidInput`` for a filter that keeps every saga."""
    bound = MAX_SAGAS if bound is None else bound
    if not {*wanted.query()} - {"sort", "order"}:
        raise InvalidInput("a bulk act needs at least one filter (a status is enough)")
    found: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.search_sagas(wanted, min(_PAGE, MAX_LIMIT), cursor)
        found += [s.saga_id for s in page.items]
        cursor = page.next_cursor
        if cursor is None or len(found) >= MAX_LIMIT:
            break
    if len(found) > bound:
        many = f"more than {MAX_LIMIT:,}" if cursor is not None else f"{len(found):,}"
        raise TooManySagas(
            f"the search selects {many} sagas; one bulk act takes at most {bound}: "
            "narrow the filter"
        )
    return found


async def act(
    orchestrator: Orchestrator,
    act: Act,
    saga_ids: Sequence[str],
    by: str,
    reason: str = "",
    *,
    wanted: SagaFilter | None = None,
) -> list[Result]:
    """Do ``act`` to each saga, in order, as ``by`` (``check`` first); one ``Result``
    each. ``wanted``: the search that selected them, kept in each abort's event (as a
    link's query). An error that is not the single act's refusal stops the walk (call
    again)."""
    search = None if wanted is None else urlencode(wanted.query(), doseq=True)
    why = check(act, by, reason)
    letters: dict[str, list[DeadLetter]] = {}
    if act is Act.RETRY_DEAD_LETTERS:
        for d in await orchestrator.store.dead_letters(None):
            letters.setdefault(d.saga_id, []).append(d)
    found: list[Result] = []
    for saga_id in saga_ids:
        try:
            if act is Act.ABORT:
                found.append(await _abort(orchestrator, saga_id, by, why, search))
            elif act is Act.RERUN:
                found.append(await _rerun(orchestrator, saga_id, by, why))
            else:
                letters_of = letters.get(saga_id, [])
                found.append(await _retry(orchestrator, saga_id, letters_of, by, why, search))
        except SagaNotFound:
            found.append(Result(saga_id, Outcome.NOT_FOUND))
        except PivotalError as exc:
            found.append(Result(saga_id, Outcome.REFUSED, exc.code, exc.message))
    return found


async def _abort(
    orchestrator: Orchestrator, saga_id: str, by: str, why: str, search: str | None
) -> Result:
    state = (await orchestrator.get(saga_id)).state
    if state.status in _OVER and (state.reason or "").startswith("aborted by "):
        return Result(saga_id, Outcome.ALREADY)
    await saga_actions.abort(orchestrator, saga_id, by, why, search=search)
    return Result(saga_id, Outcome.ACTED)


async def _rerun(orchestrator: Orchestrator, saga_id: str, by: str, why: str) -> Result:
    """The saga's plan again, as a new saga whose provenance records who asked and why
    (``rerun_of``), written with it; one made before is ``already`` (with its own)."""
    again = rerun_id(saga_id)
    if await orchestrator.store.load(again) is not None:
        return Result(saga_id, Outcome.ALREADY, rerun=again)
    state = await orchestrator.rerun(saga_id, by, why)
    return Result(saga_id, Outcome.ACTED, rerun=state.saga_id)


async def _retry(
    orchestrator: Orchestrator,
    saga_id: str,
    letters: list[DeadLetter],
    by: str,
    why: str,
    search: str | None,
) -> Result:
    """Make the saga's open dead letters due now, as the single act on the API and the
    page does: a worker's sweep retries each with its undo key (a request never runs
    hundreds of undos itself); the saga notes who asked and why (``dead_letters_due``). Letters
    already due, or all settled (before or while this runs), are ``already``; letters made
    due whose note lost to a saga that kept changing are ``acted``, with a message."""
    await orchestrator.get(saga_id)  # SagaNotFound first
    open_ = [d for d in letters if d.status == "open"]
    if not open_:
        if letters:
            return Result(saga_id, Outcome.ALREADY)
        return Result(saga_id, Outcome.REFUSED, "no_dead_letter", "the saga has no dead letter")
    now = orchestrator.clock.now()
    waiting = [d for d in open_ if d.next_retry_at is None or d.next_retry_at > now]
    if not waiting:
        return Result(saga_id, Outcome.ALREADY)
    made = [d.id for d in waiting]
    done = await orchestrator.dead_letters_due(saga_id, made, by, search, why)
    if not done.made:  # settled meanwhile
        return Result(saga_id, Outcome.ALREADY)
    if not done.noted:
        return Result(saga_id, Outcome.ACTED, message=NOT_NOTED)
    return Result(saga_id, Outcome.ACTED)


def counts(results: Sequence[Result]) -> dict[str, int]:
    """How many sagas had each outcome (every outcome named, 0 included)."""
    return {o.value: sum(r.outcome is o for r in results) for o in Outcome}
