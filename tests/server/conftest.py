"""The HTTP API over the ``store`` fixture (both backends), through the ASGI app: a client
per role, each with a token created in the ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from server_api import ROLES, Clients, MakeClient, add_token, csrf_of, open_plan_orders

from pivotal import FakeClock
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role
from pivotal.server import create_app
from pivotal.store import Store


@pytest.fixture
def api(store: Store, app: CommerceApp, clock: FakeClock) -> FastAPI:
    open_plan_orders(app.services)  # the orders plan_body's plans are for
    return create_app(store, app, clock=clock)


@pytest.fixture
async def client(api: FastAPI) -> AsyncIterator[MakeClient]:
    """``client(token)``: a client sending that bearer token (None: none)."""
    made: list[httpx.AsyncClient] = []

    def make(token: str | None) -> httpx.AsyncClient:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        c = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://pivotal", headers=headers
        )
        made.append(c)
        return c

    yield make
    for c in made:
        await c.aclose()


@pytest.fixture
async def as_role(store: Store, clock: FakeClock, client: MakeClient) -> Clients:
    """A client per role; the principal of role R is named R's value (``agent``, ...)."""
    return {role: client(await add_token(store, role.value, role, clock)) for role in ROLES}


@pytest.fixture
async def browser(api: FastAPI) -> AsyncIterator[Callable[[], httpx.AsyncClient]]:
    """Clients of the pages, each with its own cookies; closed at the end."""
    made: list[httpx.AsyncClient] = []

    def make() -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://pivotal")
        made.append(c)
        return c

    yield make
    for c in made:
        await c.aclose()


@pytest.fixture
async def login(
    browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock
) -> Callable[[Role], Awaitable[httpx.AsyncClient]]:
    """A page client logged in with a new token of the role (its session cookie is
    HttpOnly and SameSite=Strict)."""

    async def log_in(role: Role) -> httpx.AsyncClient:
        c = browser()
        token = await add_token(store, role.value, role, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        assert "httponly" in reply.headers["set-cookie"].lower()
        assert "samesite=strict" in reply.headers["set-cookie"].lower()
        return c

    return log_in
