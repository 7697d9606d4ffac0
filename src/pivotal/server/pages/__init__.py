"""The approver's and operator's web pages (server-rendered, Jinja2 with autoescaping).

``router`` serves ``/ui``: a bearer token is exchanged for a session cookie at
``/ui/login``; approvers decide pivots, operators settle dead letters and needs_human
sagas, viewers read. ``routes`` has most pages; ``workers`` the workers page; ``bulk`` an
act on every saga a search selects; ``searches`` saving a search, and deleting one. Imported
only by ``pivotal.server``."""

from __future__ import annotations

from fastapi import APIRouter

from pivotal.server.pages import bulk, routes, searches, workers

router = APIRouter()
router.include_router(routes.router)
router.include_router(workers.router)
router.include_router(bulk.router)
router.include_router(searches.router)

__all__ = ["router"]
