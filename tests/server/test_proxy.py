"""``--trust-proxy-header``: off by default; when set, a request carrying the header acts as
the principal it names, with the configured role, and without it a bearer token is needed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from server_api import Clients, approval_plan, as_json
from typer.testing import CliRunner

from pivotal import Orchestrator, SagaStatus
from pivotal.cli import cli
from pivotal.people.principals import Role
from pivotal.server.auth import trust_proxy_header
from pivotal.views.saga_scope import scoped

HEADER = "X-Forwarded-User"
PROXIES = ["127.0.0.1"]  # where httpx.ASGITransport says requests come from
BIG = scoped("agent", "big")  # the agent's saga "big", as people see it


def proxied(api: FastAPI, user: str | None) -> httpx.AsyncClient:
    headers = {"Content-Type": "application/json"}
    if user is not None:
        headers[HEADER] = user
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api), base_url="http://pivotal", headers=headers
    )


async def test_the_header_is_ignored_unless_trusted(api: FastAPI) -> None:
    async with proxied(api, "alice") as client:
        reply = await client.get("/v1/sagas")
    assert reply.status_code == 401


async def test_a_trusted_header_names_the_principal_with_the_default_viewer_role(
    api: FastAPI,
) -> None:
    trust_proxy_header(api, HEADER, proxies=PROXIES)
    async with proxied(api, "alice") as client:
        assert (await client.get("/v1/sagas")).status_code == 200
        decided = await client.post(
            "/v1/approvals/x/approve", content=as_json({"version": 1, "reason": "r"})
        )
        assert decided.status_code == 403
        assert "viewer" in decided.json()["error"]["message"]
    async with proxied(api, None) as client:  # without the header: a token is needed
        assert (await client.get("/v1/sagas")).status_code == 401


async def test_the_proxy_role_applies_and_the_name_is_recorded(
    api: FastAPI, as_role: Clients, orchestrator: Orchestrator
) -> None:
    trust_proxy_header(api, HEADER, Role.APPROVER, proxies=PROXIES)
    submitted = await as_role[Role.AGENT].post(
        "/v1/sagas?saga_id=big", content=as_json(approval_plan())
    )
    assert submitted.status_code == 201, submitted.text  # a token still works
    version = (await orchestrator.run(BIG)).version
    async with proxied(api, "alice") as alice:
        refused = await alice.post("/v1/sagas?saga_id=other", content=as_json(approval_plan()))
        assert refused.status_code == 403  # an approver may not submit
        decided = await alice.post(
            f"/v1/approvals/{BIG}/approve", content=as_json({"version": version, "reason": "ok"})
        )
    assert decided.status_code == 200, decided.text
    assert decided.json()["approval"]["approver"] == "alice"
    assert (await orchestrator.run(BIG)).status is SagaStatus.COMPLETED


@pytest.mark.parametrize("user", ["", "   ", "a" * 201, "bad\x01name"])
async def test_a_blank_or_odd_header_value_is_401(api: FastAPI, user: str) -> None:
    trust_proxy_header(api, HEADER, proxies=PROXIES)
    async with proxied(api, user) as client:
        reply = await client.get("/v1/sagas")
    assert reply.status_code == 401


def test_a_header_name_is_checked(api: FastAPI) -> None:
    for bad in ("", "X Forwarded", "X-User:"):
        with pytest.raises(ValueError, match="not a header name"):
            trust_proxy_header(api, bad, proxies=PROXIES)


def test_serve_check_reports_the_trusted_header(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    args = ["--db", db, "--example-app", "serve", "--check"]
    assert CliRunner().invoke(cli, ["--db", db, "migrate"]).exit_code == 0  # --check makes none
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["trust_proxy_header"] is None
    trusted = [*args, "--trust-proxy-header", HEADER, "--proxy-role", "operator"]
    unsure = CliRunner().invoke(cli, trusted)  # from which proxies?
    assert unsure.exit_code == 2
    assert "--trusted-proxy" in unsure.stderr
    trusted += ["--trusted-proxy", "127.0.0.1", "--trusted-proxy", "10.0.0.0/8"]
    done = CliRunner().invoke(cli, [*trusted, "--json"])
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["trust_proxy_header"] == {
        "header": HEADER,
        "role": "operator",
        "proxies": ["127.0.0.1", "10.0.0.0/8"],
        "secret_header": None,
    }
    done = CliRunner().invoke(cli, trusted)
    assert done.exit_code == 0, done.stderr
    assert "strips it from clients" in done.stderr
    bad = CliRunner().invoke(cli, [*args, "--trust-proxy-header", "X User"])
    assert bad.exit_code == 2
    odd = CliRunner().invoke(cli, [*trusted[:-1], "10.0.0.300/8"])
    assert odd.exit_code == 2
    assert "not an IP address or network" in odd.stderr
    secretless = [*trusted, "--proxy-secret-header", "X-Proxy-Secret"]
    missing = CliRunner().invoke(cli, secretless, env={"PIVOTAL_PROXY_SECRET": ""})
    assert missing.exit_code == 2
    assert "PIVOTAL_PROXY_SECRET" in missing.stderr
    done = CliRunner().invoke(cli, [*secretless, "--json"], env={"PIVOTAL_PROXY_SECRET": "s" * 32})
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["trust_proxy_header"]["secret_header"] == "X-Proxy-Secret"
    assert "s" * 32 not in done.stdout + done.stderr
