"""``Client``: Pivotal's HTTP API, called synchronously."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

import httpx

from pivotal.client import _calls as calls
from pivotal.client._calls import Attempts, Backoff, Listed, PlanLike, SagaFilters
from pivotal.client._errors import UnexpectedReply
from pivotal.sagas import saga_ids
from pivotal.server import views
from pivotal.views.agent_view import SagaView as AgentSagaView

R = TypeVar("R")


class Client:
    """A client of ``pivotal serve`` at ``base_url``, calling as the principal of ``token``
    (``pivotal tokens create``).

    Reads, validations, submissions, reruns and forks are sent again after a transport
    error, a 502, 503 or 504, or a 429 whose ``Retry-After`` asks at most ``max_backoff``,
    ``retries`` times at most, waiting ``backoff`` seconds and twice as long each time (at
    most ``max_backoff``, with jitter; longer when ``Retry-After`` asks); decisions, aborts
    and what operators settle (resume, resolve, dead letters, escalations) only when
    nothing was sent. An error answer is raised as the ``PivotalError`` of its code
    (``ApiError``; a 429 that is not sent again, ``RateLimited``); no answer, as
    ``ServerUnreachable`` or ``OutcomeUnknown``. ``transport``: httpx's, in
    place of the network (tests). Close it, or use it as a context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        retries: int = 3,
        backoff: float = 0.25,
        max_backoff: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = calls.base_url_of(base_url)
        self.backoff = Backoff(retries, backoff, max_backoff)
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=calls.headers_of(token),
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: calls.Call) -> httpx.Response:
        attempts = Attempts(call, self.backoff)
        while True:
            try:
                response = self._http.request(
                    call.method, call.path, params=call.params, content=call.body
                )
            except httpx.TransportError as exc:
                time.sleep(attempts.failed(exc))  # or raises: no attempt left
                continue
            wait = attempts.answered(response)
            if wait is None:
                return response
            time.sleep(wait)

    def _pages(self, page_of: Callable[[int], calls.Call], model: type[views.Page[R]]) -> list[R]:
        """Every item of a list the API pages by offset: ``page_of(offset)`` is the call of
        the page from ``offset``."""
        found: list[R] = []
        offset: int | None = 0
        while offset is not None:
            page = calls.read(model, self._send(page_of(offset)))
            found.extend(page.items)
            if page.next_offset is not None and page.next_offset <= offset:
                raise UnexpectedReply("the server gave an earlier page's offset as the next")
            offset = page.next_offset
        return found

    # -- plans and sagas (an agent submits them; people read them too) -----------------------

    def validate(self, plan: PlanLike) -> views.Validated:
        """Every error the plan has (``valid`` false), nothing recorded; a plan that cannot
        be read as a plan at all raises ``PlanParseError``."""
        return calls.read(views.Validated, self._send(calls.validate(plan)))

    def submit(self, plan: PlanLike, *, saga_id: str | None = None) -> views.Submitted:
        """Record the plan as saga ``saga_id`` (without one, a new id, made here before the
        first attempt: an attempt whose answer was lost and the next one record one saga).
        The same id with the same plan answers the saga recorded (``created`` false); with
        another plan, ``SagaConflict``. ``PlanRejected`` with its ``errors`` for an invalid
        plan; ``RolloutShadowed`` (its ``run_id``) when the rollout kept it in shadow."""
        chosen = saga_id if saga_id is not None else saga_ids.new()
        return calls.read(views.Submitted, self._send(calls.submit(plan, chosen)))

    def get(self, saga_id: str) -> views.SagaView | AgentSagaView:
        """The saga: a person's view, or an agent's own saga as agents are shown it."""
        return calls.saga_view(self._send(calls.saga(saga_id)))

    # -- what people do: search, decide, abort, run again ---------------------------------

    def events(self, saga_id: str) -> views.EventLog:
        """The saga's event log, oldest first, its texts redacted."""
        return calls.read(views.EventLog, self._send(calls.events(saga_id)))

    def search_page(
        self,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        **filters: Unpack[SagaFilters],
    ) -> views.SagaPage:
        """One page of the sagas ``filters`` select (newest first unless ``order``),
        ``limit`` at most (the server's default: 100; at most 500); its ``next_cursor``
        starts the next page."""
        return calls.read(views.SagaPage, self._send(calls.search(filters, cursor, limit)))

    def search(
        self, *, page_size: int | None = None, **filters: Unpack[SagaFilters]
    ) -> Iterator[views.SagaRow]:
        """Every saga ``filters`` select, a page of ``page_size`` at a time."""
        cursor: str | None = None
        while True:
            page = self.search_page(cursor=cursor, limit=page_size, **filters)
            yield from page.items
            if page.next_cursor is None:
                return
            if page.next_cursor == cursor:
                raise UnexpectedReply("the server gave the same page's cursor again")
            cursor = page.next_cursor

    def approvals(self, *, page_size: int | None = None) -> list[views.PendingRow]:
        """Every pivot waiting for a decision, oldest first, with the ``version`` to decide
        on. The API pages them by offset: a pivot decided while the pages are read moves
        the later ones up, and one of them is then missed until the next call."""
        page_of = functools.partial(calls.approvals, page_size)
        return self._pages(page_of, views.Page[views.PendingRow])

    def approve(self, saga_id: str, *, version: int, reason: str = "") -> views.Outcome:
        """Approve the saga's pivot, decided on saga ``version`` (``VersionConflict`` when it
        changed since; ``FourEyesError`` for its submitter). The approver is the token's
        principal."""
        return self._decide(saga_id, "approve", version, reason)

    def reject(self, saga_id: str, *, version: int, reason: str = "") -> views.Outcome:
        """Reject the saga's pivot: it compensates (``version`` as for ``approve``)."""
        return self._decide(saga_id, "reject", version, reason)

    def _decide(self, saga_id: str, verdict: str, version: int, reason: str) -> views.Outcome:
        call = calls.decision(saga_id, verdict, version, reason)
        return calls.read(views.Outcome, self._send(call))

    def abort(self, saga_id: str, *, reason: str) -> views.Outcome:
        """A saga not yet at its point of no return starts compensating (a worker runs the
        undos); ``SagaNotAbortable`` otherwise. The one who aborts is the token's principal."""
        return calls.read(views.Outcome, self._send(calls.abort(saga_id, reason)))

    def rerun(self, saga_id: str) -> views.Outcome:
        """The plan of a compensated saga, submitted again as a new saga (its id: the
        answer's ``saga_id``; asking again answers the same one). ``SagaNotRerunnable``
        for any other saga."""
        return calls.read(views.Outcome, self._send(calls.rerun(saga_id)))

    def fork(self, saga_id: str, *, changes: Mapping[str, Any], reason: str) -> views.Outcome:
        """The plan of a finished saga with arguments changed (``changes``: ``{"STEP.ARGUMENT":
        value}``, STEP a call's index from 0 or the name of a step the plan calls once),
        submitted as a new saga (its id: the answer's ``saga_id``), approved anew and not
        by its forker. The same request again answers the same fork. ``SagaNotForkable``
        for a saga not finished; ``PlanRejected`` for changes that do not validate."""
        call = calls.fork(saga_id, changes, reason)
        return calls.read(views.Outcome, self._send(call))

    # -- what operators settle: parked sagas, dead letters, escalations ---------------------

    def resume(
        self, saga_id: str, *, reason: str, from_step: int | str | None = None
    ) -> views.Outcome:
        """A saga parked ``needs_human`` whose cause was fixed goes on (a worker runs it),
        with the same keys. ``from_step`` (a step's index from 0, or its name): it goes on
        at that step, the steps before it that had not succeeded declared settled by hand
        by the token's principal (``ResumeFromRefused``, nothing recorded, when the saga
        machine does not allow it). ``SagaNotParked`` for a saga not parked."""
        call = calls.resume(saga_id, reason, from_step)
        return calls.read(views.Outcome, self._send(call))

    def resolve(self, saga_id: str, *, reason: str) -> views.Outcome:
        """A saga parked ``needs_human`` was settled outside Pivotal: it ends ``resolved``.
        ``SagaNotParked`` for a saga not parked."""
        call = calls.resolve(saga_id, reason)
        return calls.read(views.Outcome, self._send(call))

    def dead_letters(
        self, *, status: Listed = "open", page_size: int | None = None
    ) -> list[views.DeadLetterRow]:
        """Every dead letter (an undo that could not run) of ``status`` (``open``,
        ``resolved`` or ``all``), oldest first. Paged by offset, as ``approvals``."""
        page_of = functools.partial(calls.dead_letters, status, page_size)
        return self._pages(page_of, views.Page[views.DeadLetterRow])

    def retry_dead_letter(self, dead_letter_id: int) -> views.Retried:
        """Make the open dead letter's undo due now: a worker's sweep retries it with its undo
        key (``noted`` false: the saga kept changing and who asked is not noted on it).
        ``DeadLetterNotFound`` for no open letter of that id."""
        call = calls.retry_dead_letter(dead_letter_id)
        return calls.read(views.Retried, self._send(call))

    def resolve_dead_letter(self, dead_letter_id: int, *, reason: str) -> views.Resolved:
        """Record that the token's principal settled the open dead letter's undo by hand,
        and why. ``DeadLetterNotFound`` for no open letter of that id."""
        call = calls.resolve_dead_letter(dead_letter_id, reason)
        return calls.read(views.Resolved, self._send(call))

    def escalations(
        self, *, status: Listed = "open", page_size: int | None = None
    ) -> list[views.EscalationRow]:
        """Every escalation (a request no planner could turn into a valid plan) of
        ``status``, newest first. Paged by offset, as ``approvals``."""
        page_of = functools.partial(calls.escalations, status, page_size)
        return self._pages(page_of, views.Page[views.EscalationRow])

    def resolve_escalation(
        self, escalation_id: int, *, reason: str, saga_id: str | None = None
    ) -> views.EscalationRow:
        """Close the open escalation, with the token's principal and ``reason`` (and the saga
        a person started to settle it). ``EscalationNotFound``, ``EscalationClosed``."""
        call = calls.resolve_escalation(escalation_id, reason, saga_id)
        return calls.read(views.EscalationRow, self._send(call))
