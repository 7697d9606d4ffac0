"""Who may call what: every endpoint against every role, and calls without a valid token."""

from __future__ import annotations

from typing import Any

import pytest
from server_api import ROLES, Clients, MakeClient, as_json, plan_body

from pivotal import FakeClock
from pivotal.people.principals import Role, hash_token
from pivotal.store import Store

A, P, OP, V, ADMIN = Role.AGENT, Role.APPROVER, Role.OPERATOR, Role.VIEWER, Role.ADMIN
READERS = {P, OP, V, ADMIN}
WHY = {"reason": "checked by hand"}

# method, path, body, {roles allowed: status}; every other role gets 403. A call that
# passes the role check on an id that names nothing answers 404.
ENDPOINTS: list[tuple[str, str, Any, dict[Role, int]]] = [
    ("GET", "/v1/catalogues/checkout", None, dict.fromkeys(ROLES, 200)),
    ("POST", "/v1/plans/validate", plan_body(), {A: 200, ADMIN: 200}),
    ("POST", "/v1/sagas?saga_id=s-{role}", plan_body(), {A: 201, ADMIN: 201}),
    ("GET", "/v1/sagas", None, dict.fromkeys(READERS, 200)),
    ("GET", "/v1/sagas/nope", None, dict.fromkeys(ROLES, 404)),
    ("GET", "/v1/approvals", None, dict.fromkeys(READERS, 200)),
    ("POST", "/v1/approvals/nope/approve", {"version": 1}, {P: 404, ADMIN: 404}),
    ("POST", "/v1/approvals/nope/reject", {"version": 1}, {P: 404, ADMIN: 404}),
    ("GET", "/v1/dead-letters", None, dict.fromkeys(READERS, 200)),
    ("POST", "/v1/dead-letters/7/retry", None, {OP: 404, ADMIN: 404}),
    ("POST", "/v1/dead-letters/7/resolve", WHY, {OP: 404, ADMIN: 404}),
    ("GET", "/v1/escalations", None, dict.fromkeys(READERS, 200)),
    ("POST", "/v1/escalations/7/resolve", WHY, {OP: 404, ADMIN: 404}),
    ("POST", "/v1/sagas/nope/resume", WHY, {OP: 404, ADMIN: 404}),
    ("POST", "/v1/sagas/nope/resolve", WHY, {OP: 404, ADMIN: 404}),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS]
)
async def test_each_role_gets_what_its_role_allows(
    as_role: Clients, method: str, path: str, body: Any, allowed: dict[Role, int]
) -> None:
    for role in ROLES:
        content = as_json(body) if body is not None else None
        reply = await as_role[role].request(method, path.format(role=role.value), content=content)
        expected = allowed.get(role, 403)
        assert reply.status_code == expected, (role, reply.text)
        if expected >= 400:
            error = reply.json()["error"]
            assert set(error) >= {"code", "message"}
            if expected == 403:
                assert error["code"] == "forbidden"


@pytest.mark.parametrize(("method", "path", "body", "allowed"), ENDPOINTS[:4])
async def test_no_token_or_a_bad_one_is_401(
    client: MakeClient, method: str, path: str, body: Any, allowed: dict[Role, int]
) -> None:
    content = as_json(body) if body is not None else None
    for token in (None, "", "pvt_unknown", "x" * 10_000):
        reply = await client(token).request(method, path, content=content)
        assert reply.status_code == 401, (token and token[:20], reply.text)
        assert reply.json()["error"]["code"] == "unauthorized"
        assert reply.headers["www-authenticate"] == "Bearer"


async def test_a_revoked_token_is_401(store: Store, clock: FakeClock, client: MakeClient) -> None:
    token = await store.create_token("eve", "viewer", hash_token("pvt_eve"), clock.now())
    eve = client("pvt_eve")
    assert (await eve.get("/v1/sagas")).status_code == 200
    revoked = await store.revoke_token(token.id, clock.now())
    assert revoked is not None
    assert revoked.revoked_at == clock.now()
    assert (await eve.get("/v1/sagas")).status_code == 401


async def test_health_needs_no_token(client: MakeClient) -> None:
    anonymous = client(None)
    assert (await anonymous.get("/healthz")).json() == {"status": "ok"}
    ready = await anonymous.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    assert (await anonymous.get("/openapi.json")).status_code == 401  # a token of any role


async def test_the_openapi_document_needs_a_token_and_there_is_no_redoc_page(
    as_role: Clients, client: MakeClient
) -> None:
    spec = await as_role[Role.AGENT].get("/openapi.json")
    assert spec.status_code == 200
    assert "/v1/approvals/{saga_id}/approve" in spec.json()["paths"]
    assert spec.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in spec.headers["content-security-policy"]
    assert (await as_role[Role.AGENT].get("/docs")).status_code == 200  # test_api_reference
    assert (await as_role[Role.ADMIN].get("/redoc")).status_code == 404
    assert (await client(None).get("/redoc")).status_code == 404
    # FastAPI's own Swagger page and its OAuth2 redirect are not served: /docs is ours
    assert (await as_role[Role.ADMIN].get("/docs/oauth2-redirect")).status_code == 404


async def test_readyz_on_a_closed_store_is_503(store: Store, client: MakeClient) -> None:
    await store.close()
    reply = await client(None).get("/readyz")
    assert reply.status_code == 503
    assert reply.json()["error"]["code"].startswith("store_")
    assert (await client(None).get("/healthz")).status_code == 200
