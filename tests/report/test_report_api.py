"""``GET /v1/report``: operators, viewers and admins read it; the others are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from report_ledger import Ledger

from pivotal import FakeClock
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app
from pivotal.store import Store


@pytest.fixture
async def clients(
    store: Store, app: CommerceApp, clock: FakeClock
) -> AsyncIterator[dict[Role | None, httpx.AsyncClient]]:
    """A client per role (and one without a token), over the ASGI app."""
    api = create_app(store, app, clock=clock)
    made: dict[Role | None, httpx.AsyncClient] = {}
    for role in (*Role, None):
        headers = {}
        if role is not None:
            secret = f"pvt_report_{role.value}"
            await store.create_token(role.value, role.value, hash_token(secret), clock.now())
            headers["Authorization"] = f"Bearer {secret}"
        made[role] = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://pivotal", headers=headers
        )
    yield made
    for c in made.values():
        await c.aclose()


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.VIEWER, Role.ADMIN])
async def test_reviewers_get_the_report(
    reviewed: Ledger, clients: dict[Role | None, httpx.AsyncClient], role: Role
) -> None:
    reply = await clients[role].get("/v1/report", params={"since": "7d"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["sagas"] == 7
    assert body["by_status"] == {"compensated": 4, "compensation_failed": 1, "needs_human": 2}
    causes = {g["cause"]["label"]: g["count"] for g in body["causes"]}
    assert causes["charge_payment: permanent"] == 2
    assert causes["capture_payment: approval rejected"] == 1
    declined = body["causes"][0]["sagas"][0]
    assert declined["provenance"]["actor_id"] == "order-bot"
    assert declined["provenance"]["prompt_version"] == "checkout-v3"
    assert body["planner"]["rejected_attempts"] == 3
    assert body["truncated"] is False


async def test_the_period_and_the_limit_are_the_callers(
    reviewed: Ledger, clients: dict[Role | None, httpx.AsyncClient]
) -> None:
    viewer = clients[Role.VIEWER]
    wide = (await viewer.get("/v1/report", params={"since": "30d"})).json()
    assert wide["sagas"] == 8
    cut = (await viewer.get("/v1/report", params={"since": "30d", "limit": 2})).json()
    assert cut["truncated"] is True
    assert cut["limit"] == 2
    default = (await viewer.get("/v1/report")).json()
    assert default["until"] - default["since"] == 7 * 86_400


@pytest.mark.parametrize("role", [Role.AGENT, Role.APPROVER])
async def test_other_roles_are_refused(
    store: Store, clients: dict[Role | None, httpx.AsyncClient], role: Role
) -> None:
    reply = await clients[role].get("/v1/report")
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "forbidden"


async def test_without_a_token_it_is_401(
    store: Store, clients: dict[Role | None, httpx.AsyncClient]
) -> None:
    reply = await clients[None].get("/v1/report")
    assert reply.status_code == 401
    assert reply.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"since": "last week"}, "invalid_period"),
        ({"since": "1d", "until": "2d"}, "invalid_period"),
        ({"limit": "0"}, "invalid_input"),
        ({"since": "x" * 65}, "invalid_input"),
    ],
)
async def test_a_bad_query_is_422_with_its_code(
    store: Store,
    clients: dict[Role | None, httpx.AsyncClient],
    params: dict[str, str],
    code: str,
) -> None:
    reply = await clients[Role.OPERATOR].get("/v1/report", params=params)
    assert reply.status_code == 422
    assert reply.json()["error"]["code"] == code


async def test_the_report_is_documented_in_the_openapi_schema(
    store: Store, clients: dict[Role | None, httpx.AsyncClient]
) -> None:
    schema = (await clients[Role.VIEWER].get("/openapi.json")).json()  # needs a token
    operation = schema["paths"]["/v1/report"]["get"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Report"
    }
    assert {"401", "403", "422", "503"} <= set(operation["responses"])
    assert "CauseGroup" in schema["components"]["schemas"]
