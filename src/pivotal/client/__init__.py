"""A typed client of Pivotal's HTTP API (``pivotal serve``), over httpx: ``Client``, and
``AsyncClient`` for asyncio, each answer as the server's own answer shapes
(``pivotal.server.views``; an agent's view of its saga, ``pivotal.views.agent_view.SagaView``).

A submission is idempotent by its saga id, which the client makes before the first attempt
when none is given, so that a submission sent again after a lost answer records one saga.
Which calls are sent again after which failures: ``pivotal.client._calls``.

An error answer is raised as the ``PivotalError`` subclass of its code (``SagaNotFound``,
``PlanRejected``, ``Unauthorized``, ...) that is also an ``ApiError`` (``status``, ``body``);
a code this version does not know, as a plain ``ApiError`` with that ``code``; a 429 as
``RateLimited``, with the seconds its ``Retry-After`` asked (``retry_after``). No answer:
``ServerUnreachable`` (nothing was sent) or ``OutcomeUnknown`` (it may have been carried
out); an answer that makes no sense, ``UnexpectedReply``. All are ``ClientError``s.

``import pivotal.client`` loads httpx, never FastAPI; ``import pivotal`` loads neither."""

from __future__ import annotations

from pivotal.client._async import AsyncClient
from pivotal.client._calls import SagaFilters
from pivotal.client._errors import (
    ApiError,
    ClientError,
    OutcomeUnknown,
    RateLimited,
    ServerUnreachable,
    UnexpectedReply,
    error_class,
)
from pivotal.client._sync import Client

__all__ = [
    "AsyncClient",
    "Client",
    "SagaFilters",
    "ApiError",
    "ClientError",
    "OutcomeUnknown",
    "RateLimited",
    "ServerUnreachable",
    "UnexpectedReply",
    "error_class",
]
