"""One real ``pivotal serve`` per test module of the client's (``live_server.Served``), and
a client of either kind of it per test (``connect``)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from live_server import AnyClient, Connect, Served, done

from pivotal.client import AsyncClient, Client


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("served"))
    server.start()
    try:
        yield server
    finally:
        server.stop(signal.SIGKILL)


@pytest.fixture(params=["sync", "async"])
async def connect(request: pytest.FixtureRequest, served: Served) -> AsyncIterator[Connect]:
    """``connect(name)``: a client (of the kind the test runs with) with that principal's
    token (a name not in ``live_server.ROLES`` is sent as the token); closed at the end."""
    made: list[AnyClient] = []

    def make(name: str | None = None, **options: Any) -> AnyClient:
        token = served.tokens.get(name or "", name)
        kind = Client if request.param == "sync" else AsyncClient
        made.append(kind(served.url, token=token, **options))
        return made[-1]

    yield make
    for c in made:
        await done(c.aclose() if isinstance(c, AsyncClient) else c.close())
