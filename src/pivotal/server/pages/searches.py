"""Saving a search from the sagas page, by name, and deleting one (``store.saved``).

``POST /ui/searches`` with the search's query (the filters of "Link to this search") and a
name keeps it as the signed-in person's own and shows it; ``POST /ui/searches/{name}/delete``
deletes one of theirs and goes back to the search the page showed. The page lists the
person's saved searches, each a link to the sagas page with its query (``routes.sagas``).
Both forms are CSRF-checked; what is refused says why, and nothing is saved or deleted."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from pivotal.errors import InvalidInput
from pivotal.server.pages.routes import READERS, _ctx, _posted, refused, to
from pivotal.store.saved import canonical_query

router = APIRouter(prefix="/ui", include_in_schema=False)


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


@router.post("/searches")
async def save_search(request: Request) -> Response:
    posted = await _posted(request, READERS)
    if isinstance(posted, Response):
        return posted
    who, form = posted
    try:
        saved = await _ctx(request).store.save_search(
            who.name, _text(form, "name"), _text(form, "query")
        )
    except InvalidInput as exc:
        return refused(request, who, 400, f"{exc.message}; nothing was saved.")
    return to("/ui/sagas?" + saved.query)


@router.post("/searches/{name}/delete")
async def delete_search(request: Request, name: str) -> Response:
    posted = await _posted(request, READERS)
    if isinstance(posted, Response):
        return posted
    who, form = posted
    ctx = _ctx(request)
    try:
        deleted = await ctx.store.delete_search(who.name, name)
    except InvalidInput as exc:
        return refused(request, who, 400, f"{exc.message}; nothing was deleted.")
    if not deleted:
        return refused(request, who, 404, "You have no saved search of that name.")
    return to(_back(_text(form, "back"), ctx.clock.now()))


def _back(search: str, now: float) -> str:
    """The sagas page with the search it showed (its filters, checked again: never another
    address), or with none."""
    try:
        query = canonical_query(search, now)
    except InvalidInput:
        return "/ui/sagas"
    return "/ui/sagas?" + query if query else "/ui/sagas"
