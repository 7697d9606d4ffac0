"""The web pages under ``/ui``: login, the approvals queue and detail, saga timelines and
the operators' dead letters, escalations and needs_human sagas. Every POST form is
CSRF-checked."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.datastructures import FormData
from starlette.responses import HTMLResponse, RedirectResponse, Response

from pivotal.errors import (
    ApprovalError,
    FourEyesError,
    InvalidInput,
    PlanRejected,
    RolloutRefused,
    RolloutShadowed,
    SagaConflict,
    SagaNotFound,
    SagaNotParked,
    VersionConflict,
)
from pivotal.operations import bulk
from pivotal.orchestration.fork import parse_edit
from pivotal.orchestration.four_eyes import why_not
from pivotal.people.principals import Role
from pivotal.planning.escalations import resolve_escalation
from pivotal.sagas import progress as live_progress
from pivotal.sagas import saga_ids
from pivotal.sagas.state import SagaStatus
from pivotal.server import limits
from pivotal.server.context import Context
from pivotal.server.pages import pictures, session, views
from pivotal.server.pages.session import Viewer
from pivotal.store.planning_records import (
    EscalationClosed,
    EscalationNotFound,
    EscalationStatus,
)
from pivotal.store.search import FIELDS, PAGING, SagaFilter, refuse_unknown
from pivotal.views import approval_view, saga_actions, worker_wait

router = APIRouter(prefix="/ui", include_in_schema=False)

_HERE = resources.files("pivotal.server")
templates = Environment(
    loader=FileSystemLoader(str(_HERE / "templates")),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC = {"style.css": "text/css", "poll.js": "text/javascript", "icon.svg": "image/svg+xml"}
NOTICES = {
    "approved": "Approved: a worker runs the saga on.",
    "rejected": "Rejected: a worker runs the undos.",
    "retry": "The dead letter is due now: a worker's sweep retries it.",
    "retry-not-noted": "The dead letter is due now: a worker's sweep retries it. Who asked "
    "is not noted on its saga: the saga kept changing.",
    "resolved": "Recorded as resolved.",
    "resumed": "Resumed: a worker picks the saga up.",
    "escalation": "The escalation is closed.",
}
ORDERS = ("oldest", "newest")
SHOWN = 200  # rows a list page shows
OPEN_ESCALATIONS = 5000  # how many open escalations are read to show the oldest first
MAX_REASON = 4000
READERS = (Role.APPROVER, Role.OPERATOR, Role.VIEWER)
Page = Callable[[Request, Context, Viewer], Awaitable[Response]]


def _ctx(request: Request) -> Context:
    found: Context = request.app.state.pivotal
    return found


def page(
    request: Request, name: str, status: int = 200, who: Viewer | None = None, **values: Any
) -> HTMLResponse:
    html = templates.get_template(name).render(
        who=who, path=request.url.path, csrf=who.csrf if who else "", **values
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def refused(request: Request, who: Viewer | None, status: int, message: str) -> HTMLResponse:
    return page(request, "error.html", status, who, status_code=status, message=message)


def to(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


async def _who(request: Request, roles: tuple[Role, ...]) -> Viewer | Response:
    who = await session.viewer(request, _ctx(request).store)
    if who is None:
        return to("/ui/login")
    if not who.may(*roles):
        allowed = ", ".join(sorted({r.value for r in roles} | {"admin"}))
        return refused(request, who, 403, f"The role {who.role.value} may not do this ({allowed}).")
    return who


async def _posted(request: Request, roles: tuple[Role, ...]) -> tuple[Viewer, FormData] | Response:
    """Who posts a page's form, and the form: the one rule every form a page posts passes
    (but the login's): a session (else to the login page), one of ``roles`` (admin may do
    all; else 403) and the form's CSRF token, that of the session (else 403). The response
    that refuses it otherwise, nothing done."""
    who = await _who(request, roles)
    if not isinstance(who, Viewer):
        return who
    form = await request.form()
    if not session.same(form.get("csrf"), who.csrf):
        return refused(request, who, 403, "The form's CSRF token is missing or wrong.")
    return who, form


def _reason(form: FormData) -> str | None:
    reason = form.get("reason")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
        return None
    return reason.strip()


# -- static files and login ----------------------------------------------------------------


@router.get("/static/{name}")
async def static(name: str) -> Response:
    if name not in STATIC:
        return Response("not found", status_code=404)
    body = (_HERE / "static" / name).read_bytes()
    return Response(body, media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})


@router.get("")
async def home() -> Response:
    return to("/ui/approvals")


@router.get("/login")
async def login_form(request: Request) -> Response:
    return _login_page(request, 200, "")


def _login_page(request: Request, status: int, error: str) -> Response:
    token = secrets.token_urlsafe(24)
    response = page(request, "login.html", status, login_csrf=token, error=error)
    session.set_cookie(request, response, session.LOGIN_COOKIE, token, 3600)
    return response


def _failed_login(request: Request, token_hash: str | None) -> Response:
    """401, counted against the address and the token (``limits.login_failed``); 429 with
    ``Retry-After`` while either is locked. A valid token is never refused here."""
    wait = limits.login_failed(request.scope, token_hash)
    if wait is None:
        return _login_page(request, 401, "That token is unknown or revoked.")
    response = _login_page(request, 429, f"Too many failed logins: try again in {wait} s.")
    response.headers["Retry-After"] = str(wait)
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    form = await request.form()
    if not session.same(form.get("csrf"), request.cookies.get(session.LOGIN_COOKIE)):
        return refused(request, None, 403, "The login form's CSRF token is missing or wrong.")
    token = form.get("token")
    if not isinstance(token, str) or not token.strip() or len(token) > session.MAX_TOKEN:
        return _failed_login(request, None)
    sessions = session.sessions_of(request)
    sid, opened = sessions.open(token.strip())
    locked = limits.token_locked(request.scope, opened.token_hash)
    found = None if locked else await session.role_of(_ctx(request).store, opened.token_hash)
    if found is None:
        sessions.close(sid)
        return _failed_login(request, opened.token_hash)
    if found[1] is Role.AGENT:
        sessions.close(sid)
        return _login_page(request, 403, "Agents use the API, not these pages.")
    sessions.name(sid, found[0])  # its person's sessions are capped together
    response = to("/ui/approvals" if found[1] is not Role.OPERATOR else "/ui/needs-human")
    session.set_cookie(request, response, session.COOKIE, sid, int(session.TTL))
    response.delete_cookie(session.LOGIN_COOKIE, path=session.PATH)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    posted = await _posted(request, READERS)
    if isinstance(posted, Response):
        return posted
    session.sessions_of(request).close(request.cookies.get(session.COOKIE))
    response = to("/ui/login")
    response.delete_cookie(session.COOKIE, path=session.PATH)
    return response


# -- approvals -----------------------------------------------------------------------------


async def _queue(ctx: Context, newest: bool = False) -> list[dict[str, Any]]:
    now = ctx.clock.now()
    found = sorted(
        await ctx.store.pending_approvals(),
        key=lambda p: (p.approval.requested_at, p.saga_id),
        reverse=newest,
    )
    items = []
    for p in found[:SHOWN]:
        stored = await ctx.store.load(p.saga_id)
        try:
            catalogue = ctx.orchestrator.app.catalogue(p.catalogue)
        except Exception:  # a catalogue this server does not load: shown without a tier
            catalogue = None
        items.append(views.queue_item(p, stored, catalogue, now))
    return items


@router.get("/approvals")
async def approvals(request: Request, partial: bool = False, order: str = "oldest") -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    order = order if order in ORDERS else "oldest"
    items = await _queue(_ctx(request), newest=order == "newest")
    name = "queue_rows.html" if partial else "queue.html"
    rollouts = _rollouts(_ctx(request))
    return page(request, name, 200, who, items=items, order=order, rollouts=rollouts)


def _rollouts(ctx: Context) -> list[tuple[str, str]]:
    """(catalogue, its rollout) of each catalogue that limits agent plans: what an approver
    sees next to the queue (agent plans above the limit never reach it)."""
    app = ctx.orchestrator.app
    return [(c.name, c.rollout.describe()) for c in app if c.rollout is not None]


async def _detail(
    request: Request,
    who: Viewer,
    saga_id: str,
    status: int = 200,
    stale: str = "",
    kept: dict[str, str] | None = None,
) -> Response:
    ctx = _ctx(request)
    stored = await ctx.store.load(saga_id)
    if stored is None:
        return refused(request, who, 404, "There is no such saga.")
    catalogue = ctx.orchestrator.app.catalogue(stored.state.catalogue)
    now = ctx.clock.now()
    facts = ctx.orchestrator.app.facts
    asked = await approval_view.request_of(ctx.store, stored) if stored.state.approval else None
    shown = await approval_view.approval_facts(stored, catalogue, facts, asked)
    return page(
        request,
        "detail.html",
        status,
        who,
        saga=views.head(stored),
        steps=views.steps(stored),
        decision=views.decision(stored, catalogue, now, facts, shown),
        awaiting=stored.state.status is SagaStatus.AWAITING_APPROVAL,
        # why this person may not approve, if so
        four_eyes=why_not(who.name, stored, await ctx.store.events(saga_id)),
        stale=stale,
        kept=kept or {},  # a reason typed for a decision that came too late, by action
    )


@router.get("/approvals/{saga_id}")
async def approval(request: Request, saga_id: str) -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    return await _detail(request, who, saga_id)


async def _decide(request: Request, saga_id: str, approve: bool) -> Response:
    posted = await _posted(request, (Role.APPROVER,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    reason = _reason(form)
    version = form.get("version")
    if reason is None or not isinstance(version, str) or not version.isdigit():
        return refused(request, who, 400, "A decision needs a reason and the version shown.")
    ctx = _ctx(request)
    decide = ctx.orchestrator.approve if approve else ctx.orchestrator.reject
    try:
        await decide(saga_id, who.name, reason, run=False, version=int(version))
    except SagaNotFound:
        return refused(request, who, 404, "There is no such saga.")
    except FourEyesError as exc:  # the orchestrator's rule: nothing was decided
        return refused(request, who, 403, f"{exc.message} (four-eyes); nothing was decided.")
    except (VersionConflict, ApprovalError):
        return await _lost(request, who, saga_id, "approve" if approve else "reject", reason)
    return to(f"/ui/sagas/{saga_id}?notice={'approved' if approve else 'rejected'}")


async def _lost(request: Request, who: Viewer, saga_id: str, action: str, reason: str) -> Response:
    """A decision that came too late (another approver decided, or the saga moved on):
    nothing was decided, and the reason typed is kept. Once the approval is decided, the
    approver lands on the saga's page, told who decided it and when; while it still waits
    (another approver's grant of several needed), on the decision page again, the reason
    back in its box."""
    ctx = _ctx(request)
    stored = await ctx.store.load(saga_id)
    if stored is not None and stored.state.status is SagaStatus.AWAITING_APPROVAL:
        stale = "The saga changed since you opened it; nothing was decided. It is now:"
        return await _detail(request, who, saga_id, 409, stale, kept={action: reason})
    values = await _saga_values(ctx, saga_id)
    if stored is None or values is None:
        return refused(request, who, 404, "There is no such saga.")
    lost = {
        "action": action,
        "decided": views.decided(stored.state, ctx.clock.now()),
        "reason": reason,
    }
    return page(request, "saga.html", 409, who, notice="", lost=lost, **values)


@router.post("/approvals/{saga_id}/approve")
async def approve(request: Request, saga_id: str) -> Response:
    return await _decide(request, saga_id, approve=True)


@router.post("/approvals/{saga_id}/reject")
async def reject(request: Request, saga_id: str) -> Response:
    return await _decide(request, saga_id, approve=False)


# -- sagas ---------------------------------------------------------------------------------


# the filters form, in its order: (name, label, hint) of each text filter
SEARCH_FIELDS = (
    ("catalogue", "Catalogue", ""),
    ("created_since", "Created since", "7d, 24h or 2026-11-01"),
    ("created_until", "Created until", "7d, 24h or 2026-11-01"),
    ("updated_since", "Updated since", "7d, 24h or 2026-11-01"),
    ("updated_until", "Updated until", "7d, 24h or 2026-11-01"),
    ("actor_type", "Actor type", "agent, human or system"),
    ("actor_id", "Actor", ""),
    ("model", "Model", ""),
    ("run_id", "Planning run", ""),
    ("prompt_version", "Prompt version", ""),
    ("on_behalf_of", "On behalf of", ""),
    ("source_document_id", "Source document", ""),
    ("failed_step", "Failed step", "a step name"),
    ("reason", "Reason contains", "any case"),
    ("about", "Argument value", "order_id=4471"),
)


BULK_ACTS = {
    bulk.Act.ABORT: "Abort them (before their point of no return)",
    bulk.Act.RERUN: "Run their plans again (compensated ones)",
    bulk.Act.RETRY_DEAD_LETTERS: "Retry their dead letters",
}


@router.get("/sagas")
async def sagas(request: Request) -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    ctx = _ctx(request)
    query = request.query_params
    given = {k: query.getlist(k) for k in FIELDS if k in query}
    form = {k: (query.getlist(k) or [""])[0] for k, _, _ in SEARCH_FIELDS}
    form |= {"sort": query.get("sort", "created"), "order": query.get("order", "desc")}
    chosen = [s for s in query.getlist("status") if s]
    values: dict[str, Any] = {
        "statuses": [s.value for s in SagaStatus],
        "chosen": chosen,
        "fields": SEARCH_FIELDS,
        "form": form,
        "rows": [],
        "next_page": None,
        "problem": None,
        "shown": SHOWN,
        "link": None,  # the search as a link to copy (None: no search was made)
        "search": "",  # the search as the bulk form carries it
        "acts": [(a.value, BULK_ACTS[a]) for a in bulk.Act],
        "to_save": "",  # the search's filters as typed, for "Save this search"
        "saved": await _saved(ctx, who, query.multi_items()),  # the person's saved searches
    }
    try:
        refuse_unknown(query.keys(), PAGING)
        wanted = SagaFilter.parse(given, ctx.clock.now())
        found = await ctx.store.search_sagas(wanted, SHOWN, query.get("cursor") or None)
    except InvalidInput as exc:  # a bad filter or cursor: the form again, saying why
        return page(request, "sagas.html", 400, who, **values | {"problem": exc.message})
    values["rows"] = [
        {
            "saga_id": s.saga_id,
            "catalogue": s.catalogue,
            "status": s.status.value,
            "created_at": views.when(s.created_at),
            "updated_at": views.when(s.updated_at),
            "reason": views.as_text(s.reason or "", 120),
        }
        for s in found.items
    ]
    if found.next_cursor is not None:
        following = {**wanted.query(), "cursor": found.next_cursor}
        values["next_page"] = "/ui/sagas?" + urlencode(following, doseq=True)
    values["chosen"] = [s.value for s in wanted.status]
    if wanted.query():  # a search was made: its link, and (for an operator) its acts
        given_query = [(k, v) for k, v in query.multi_items() if k != "cursor" and v.strip()]
        values["link"] = "/ui/sagas?" + urlencode(given_query)
        values["search"] = urlencode(wanted.query(), doseq=True)
        values["to_save"] = urlencode([(k, v) for k, v in given_query if k not in PAGING])
    return page(request, "sagas.html", 200, who, **values)


async def _saved(ctx: Context, who: Viewer, given: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The person's saved searches as the sagas page lists them: each a link to the sagas
    page with its query (as "Link to this search" is), marked when it is the search shown."""
    shown = urlencode([(k, v) for k, v in given if k not in PAGING and v.strip()])
    try:
        found = await ctx.store.saved_searches(who.name)
    except InvalidInput:  # a name that names no one (a proxy's header, say): none
        return []
    return [
        {"name": s.name, "link": "/ui/sagas?" + s.query, "current": s.query == shown} for s in found
    ]


@router.get("/sagas/{saga_id}")
async def saga(request: Request, saga_id: str, notice: str = "") -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    values = await _saga_values(_ctx(request), saga_id)
    if values is None:
        return refused(request, who, 404, "There is no such saga.")
    said = NOTICES.get(notice, "")
    if values["no_worker"] and "a worker" in said:  # what was done, not who goes on with it
        said = said.partition(":")[0] + "."
    return page(request, "saga.html", 200, who, notice=said, **values)


LIVE_PARTS = {"head": "_saga_live_head.html", "body": "_saga_live_body.html"}


@router.get("/sagas/{saga_id}/live")
async def saga_live(request: Request, saga_id: str, part: str = "body") -> Response:
    """A part of the saga's page as it stands now, for the page to follow a saga that is
    not at rest (``poll.js``); marked ``X-Poll-Stop`` once it is at rest."""
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    values = await _saga_values(_ctx(request), saga_id)
    if values is None or part not in LIVE_PARTS:
        return refused(request, who, 404, "There is no such saga.")
    shown = page(request, LIVE_PARTS[part], 200, who, **values)
    if not values["following"]:
        shown.headers["X-Poll-Stop"] = "at rest"
    return shown


async def _saga_values(ctx: Context, saga_id: str) -> dict[str, Any] | None:
    """What the saga's page shows of it now (None: there is no such saga)."""
    stored = await ctx.store.load(saga_id)
    if stored is None:
        return None
    now = ctx.clock.now()  # the ledger's time
    progress = await live_progress.live(ctx.store, stored.state, now)
    no_worker = await worker_wait.waiting(ctx.store, stored.state, now)
    stored, events = saga_actions.shown(stored, await ctx.store.events(saga_id))
    state = stored.state
    return {
        "no_worker": no_worker,
        "run_worker": worker_wait.RUN,
        "saga": views.head(stored),
        # overdue by the clock that set the due times: the ledger's (``clock.LedgerClock``)
        "steps": views.steps(stored, events, progress, ctx.orchestrator.clock.now()),
        "events": views.timeline(state, events),
        # the timeline says where each call stands as the steps table does, at the same time
        "pictures": pictures.for_page(state, events, ctx.orchestrator.app, now, progress),
        "parked": state.status is SagaStatus.NEEDS_HUMAN,
        "awaiting": state.status is SagaStatus.AWAITING_APPROVAL,
        "following": not state.status.terminal,
        "actions": saga_actions.offered(state, ctx.orchestrator.clock.now()),
    }


# -- any saga: abort, run again, download its events (``saga_actions``) -------------------
# Registered before ``POST /sagas/{saga_id}/{action}`` below, which would take them first.

NOTICES |= {
    "aborted": "Aborted: a worker runs the undos.",
    "rerun": "Submitted again as this new saga: a worker runs it (approval applies anew).",
    "forked": "Forked into this new saga, its arguments changed: a worker runs it (approval "
    "applies anew, and not by you).",
}


@router.post("/sagas/{saga_id}/abort")
async def abort_saga(request: Request, saga_id: str) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    reason = form.get("reason")
    try:
        given = reason if isinstance(reason, str) else ""
        await saga_actions.abort(_ctx(request).orchestrator, saga_id, who.name, given)
    except SagaNotFound:
        return refused(request, who, 404, "There is no such saga.")
    except InvalidInput as exc:
        return refused(request, who, 400, f"{exc.message}; nothing was aborted.")
    except (SagaConflict, VersionConflict) as exc:  # SagaNotAbortable: the engine's reason
        return refused(request, who, 409, f"{exc.message}; nothing was aborted.")
    return to(f"/ui/sagas/{quote(saga_id, safe='')}?notice=aborted")


@router.post("/sagas/{saga_id}/rerun")
async def rerun_saga(request: Request, saga_id: str) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, _ = posted
    try:
        state = await _ctx(request).orchestrator.rerun(saga_id, who.name)
    except SagaNotFound:
        return refused(request, who, 404, "There is no such saga.")
    except PlanRejected as exc:
        found = "; ".join(e.message for e in exc.errors[:5])
        return refused(request, who, 409, f"The plan no longer validates: {found}.")
    except (RolloutRefused, RolloutShadowed) as exc:  # an operator reads why
        return refused(request, who, 409, f"{exc.message} ({exc.detail})")
    except (InvalidInput, SagaConflict) as exc:
        return refused(request, who, 409, exc.message)
    return to(f"/ui/sagas/{quote(state.saga_id, safe='')}?notice=rerun")


@router.post("/sagas/{saga_id}/fork")
async def fork_saga(request: Request, saga_id: str) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    changes, reason = form.get("changes"), form.get("reason")
    lines = changes.splitlines() if isinstance(changes, str) else []
    try:
        edits = [parse_edit(line) for line in lines if line.strip()][:100]
        given = reason if isinstance(reason, str) else ""
        state = await saga_actions.fork(_ctx(request).orchestrator, saga_id, edits, who.name, given)
    except SagaNotFound:
        return refused(request, who, 404, "There is no such saga.")
    except PlanRejected as exc:
        found = "; ".join(f"{e.where()}: {e.message}" for e in exc.errors[:5])
        return refused(request, who, 400, f"The changed plan does not validate: {found}.")
    except (RolloutRefused, RolloutShadowed) as exc:  # an operator reads why
        return refused(request, who, 409, f"{exc.message} ({exc.detail})")
    except InvalidInput as exc:
        return refused(request, who, 400, f"{exc.message}; nothing was forked.")
    except (SagaConflict, VersionConflict) as exc:  # SagaNotForkable: why not
        return refused(request, who, 409, f"{exc.message}; nothing was forked.")
    return to(f"/ui/sagas/{quote(state.saga_id, safe='')}?notice=forked")


@router.get("/sagas/{saga_id}/events.json")
async def saga_events(request: Request, saga_id: str) -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    try:
        found = await saga_actions.events_of(_ctx(request).store, saga_id)
    except SagaNotFound:
        return refused(request, who, 404, "There is no such saga.")
    name = saga_ids.as_file_name(saga_id)
    disposition = {"Content-Disposition": f'attachment; filename="{name}.events.json"'}
    body = json.dumps(found, default=str, indent=2)
    return Response(body, media_type="application/json", headers=HEADERS | disposition)


# -- operators -----------------------------------------------------------------------------


@router.get("/dead-letters")
async def dead_letters(request: Request, notice: str = "") -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    ctx = _ctx(request)
    found = await ctx.store.dead_letters("open")
    now = ctx.orchestrator.clock.now()  # the clock that set the retries' times: the ledger's
    rows = [views.dead_letter(d, now) for d in found[:200]]
    return page(request, "dead_letters.html", 200, who, rows=rows, notice=NOTICES.get(notice, ""))


@router.post("/dead-letters/{dead_letter_id}/{action}")
async def dead_letter(request: Request, dead_letter_id: int, action: str) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    ctx = _ctx(request)
    if action == "retry":
        done = await ctx.orchestrator.dead_letter_due(dead_letter_id, who.name)
        if not done.made:
            return refused(request, who, 404, "There is no such open dead letter.")
        return to("/ui/dead-letters?notice=" + ("retry" if done.noted else "retry-not-noted"))
    if action != "resolve":
        return refused(request, who, 404, "There is no such action.")
    reason = _reason(form)
    if reason is None:
        return refused(request, who, 400, "Resolving needs a reason.")
    if not await ctx.store.dead_letters("open", id=dead_letter_id):
        return refused(request, who, 404, "There is no such open dead letter.")
    try:
        await ctx.orchestrator.resolve_dead_letter(dead_letter_id, who.name, reason)
    except (InvalidInput, SagaConflict) as exc:  # MayStillLand: until when
        return refused(request, who, 409, str(exc))
    return to("/ui/dead-letters?notice=resolved")


@router.get("/escalations")
async def escalations(request: Request, notice: str = "") -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    found = await _ctx(request).store.escalations(EscalationStatus.OPEN, OPEN_ESCALATIONS)
    oldest = sorted(found, key=lambda e: (e.created_at, e.id))
    rows = [views.escalation(e) for e in oldest[:SHOWN]]
    return page(
        request,
        "escalations.html",
        200,
        who,
        rows=rows,
        more=max(0, len(found) - SHOWN),
        notice=NOTICES.get(notice, ""),
    )


@router.post("/escalations/{escalation_id}/resolve")
async def escalation(request: Request, escalation_id: int) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    reason = _reason(form)
    if reason is None:
        return refused(request, who, 400, "Resolving an escalation needs a reason.")
    try:
        await resolve_escalation(_ctx(request).orchestrator, escalation_id, who.name, reason)
    except EscalationNotFound:
        return refused(request, who, 404, "There is no such escalation.")
    except (EscalationClosed, InvalidInput) as exc:
        return refused(request, who, 409, str(exc))
    return to("/ui/escalations?notice=escalation")


@router.get("/needs-human")
async def needs_human(request: Request, notice: str = "") -> Response:
    who = await _who(request, READERS)
    if not isinstance(who, Viewer):
        return who
    found = await _ctx(request).store.list_sagas(SagaStatus.NEEDS_HUMAN, 200)
    rows = [
        {
            "saga_id": s.saga_id,
            "catalogue": s.catalogue,
            "updated_at": views.when(s.updated_at),
            "reason": views.as_text(s.reason or "", 300),
        }
        for s in found
    ]
    return page(request, "needs_human.html", 200, who, rows=rows, notice=NOTICES.get(notice, ""))


@router.post("/sagas/{saga_id}/{action}")
async def parked(request: Request, saga_id: str, action: str) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    if action not in ("resume", "resolve"):
        return refused(request, who, 404, "There is no such action.")
    reason = _reason(form)
    if reason is None:
        return refused(request, who, 400, f"To {action} a saga needs a reason.")
    orch = _ctx(request).orchestrator
    start = form.get("from")  # resume only: go on at this step, those before settled
    try:
        if action == "resume":
            step = start.strip() if isinstance(start, str) and start.strip() else None
            await orch.resume(saga_id, who.name, reason, run=False, from_step=step)
        else:
            await orch.resolve(saga_id, who.name, reason)
    except SagaNotFound:
        return refused(request, who, 404, "There is no such saga.")
    except InvalidInput as exc:
        return refused(request, who, 400, f"{exc.message}; nothing was recorded.")
    except (SagaNotParked, SagaConflict, VersionConflict) as exc:  # ResumeFromRefused: why
        return refused(request, who, 409, str(exc))
    return to(f"/ui/sagas/{saga_id}?notice={'resumed' if action == 'resume' else 'resolved'}")
