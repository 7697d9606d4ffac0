"""Acting on every saga a search selects from the sagas page (``pivotal.operations.bulk``):
``POST /ui/sagas/bulk`` with the search (its query, as the page's link has it), the act and
the reason. The first post only asks: "Abort 37 sagas?", naming them; the answer posts the
same with what was confirmed (the count and a digest of the ids), and the sagas are acted
on only if the search still selects those very sagas (else it asks again). The result
names what became of each saga."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from pivotal.errors import InvalidInput
from pivotal.operations import bulk
from pivotal.people.principals import Role
from pivotal.server.pages.routes import _ctx, _posted, page, refused
from pivotal.store.search import PAGING, SagaFilter, refuse_unknown

router = APIRouter(prefix="/ui", include_in_schema=False)
NAMED = 50  # saga ids a confirmation names (the count says how many in all)
MAX_SEARCH = 4000  # characters of a search's query


def question(act: bulk.Act, count: int) -> str:
    """What the person confirms: ``Abort 37 sagas?``."""
    sagas = f"{count} saga" + ("" if count == 1 else "s")
    if act is bulk.Act.RETRY_DEAD_LETTERS:
        return f"Retry the dead letters of {sagas}?"
    return f"{act.value.capitalize()} {sagas}?"


def sealed(saga_ids: list[str]) -> str:
    """What a confirmation carries: the count and a digest of the ids, so that only the
    very sagas the person was asked about are acted on."""
    digest = hashlib.sha256("\n".join(saga_ids).encode()).hexdigest()[:16]
    return f"{len(saga_ids)}-{digest}"


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def wanted_of(search: str, now: float) -> SagaFilter:
    """The filter of a search's query (``status=running&catalogue=checkout``), refused
    as the sagas page refuses it."""
    if len(search) > MAX_SEARCH:
        raise InvalidInput(f"the search is longer than {MAX_SEARCH} characters")
    given = parse_qs(search, keep_blank_values=False)
    refuse_unknown(given.keys(), PAGING)
    given.pop("cursor", None)
    return SagaFilter.parse(given, now)


@router.post("/sagas/bulk")
async def act_on_many(request: Request) -> Response:
    posted = await _posted(request, (Role.OPERATOR,))
    if isinstance(posted, Response):
        return posted
    who, form = posted
    ctx = _ctx(request)
    search, reason, confirmed = _text(form, "search"), _text(form, "reason"), _text(form, "confirm")
    try:
        chosen = bulk.act_of(_text(form, "act"))
        bulk.check(chosen, who.name, reason)
        wanted = wanted_of(search, ctx.clock.now())
        saga_ids = await bulk.select(ctx.store, wanted)
    except InvalidInput as exc:
        return refused(request, who, 400, f"{exc.message}; nothing was done.")
    values: dict[str, Any] = {
        "act": chosen.value,
        "question": question(chosen, len(saga_ids)),
        "search": search,
        "reason": reason,
        "count": len(saga_ids),
        "back": "/ui/sagas?" + search,
    }
    seal = sealed(saga_ids)
    if confirmed != seal or not saga_ids:
        changed = confirmed != "" and confirmed != seal
        values |= {"named": saga_ids[:NAMED], "changed": changed, "seal": seal}
        return page(request, "sagas_bulk.html", 200, who, **values)
    results = await bulk.act(ctx.orchestrator, chosen, saga_ids, who.name, reason, wanted=wanted)
    values |= {"results": results, "counts": bulk.counts(results)}
    return page(request, "sagas_bulk_done.html", 200, who, **values)
