"""The approver's and operator's web pages (server-rendered, Jinja2 with autoescaping).

``router`` serves ``/ui``: a bearer token is exchanged for a session cookie at
``/ui/login``; approvers decide pivots, operators settle dead letters and needs_human
sagas, viewers read. Imported only by ``pivotal.server``."""

from __future__ import annotations

from pivotal.server.pages.routes import router

__all__ = ["router"]
