"""Schemathesis against the published OpenAPI (/openapi.json of the ASGI app): every
operation, with an admin token and an agent token, answers no 5xx and only what the schema
documents (status codes, content types, bodies).

The app runs on one event loop of its own (a blocking portal) where its SQLite ledger is
opened, so each generated case is sent through ``httpx.ASGITransport`` on that loop and the
response is checked by Schemathesis."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from server_api import add_token, approval_plan

from pivotal import FakeClock, Orchestrator, SQLiteStore, parse_plan
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role
from pivotal.server import create_app

EXAMPLES = 25  # per operation and token: the whole run stays well under a minute
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
BASE = "http://pivotal"


class Served:
    """The ASGI app on the portal's loop, over a seeded ledger."""

    def __init__(self, portal: BlockingPortal, api: FastAPI) -> None:
        self.portal = portal
        self.api = api
        self.calls: Counter[int] = Counter()

    def send(self, case: Any, token: str) -> httpx.Response:
        kwargs = case.as_transport_kwargs(
            base_url=BASE, headers={"Authorization": f"Bearer {token}"}
        )
        data = kwargs.pop("data", None)
        if data is not None:
            kwargs["content" if isinstance(data, (bytes, str)) else "data"] = data
        for unused in ("cookies", "verify", "timeout", "allow_redirects", "files"):
            kwargs.pop(unused, None)

        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.api)
            async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
                reply = await client.request(**kwargs)
                await reply.aread()
                return reply

        reply = self.portal.call(call)
        self.calls[reply.status_code] += 1
        return reply


@pytest.fixture
def served(
    tmp_path: Path, app: CommerceApp, clock: FakeClock
) -> Iterator[tuple[Served, dict[Role, str]]]:
    with start_blocking_portal() as portal:
        store = SQLiteStore(tmp_path / "ledger.db")
        portal.call(store.open)
        try:
            tokens = {
                role: portal.call(add_token, store, role.value, role, clock)
                for role in (Role.ADMIN, Role.AGENT)
            }

            async def seed() -> None:  # a saga waiting for an approver, so lists are not empty
                orchestrator = Orchestrator(store, app, clock=clock)
                await orchestrator.submit(parse_plan(approval_plan()), saga_id="big")
                await orchestrator.run("big")

            portal.call(seed)
            yield Served(portal, create_app(store, app, clock=clock)), tokens
        finally:
            portal.call(store.close)


def test_every_operation_conforms_to_the_published_schema(
    served: tuple[Served, dict[Role, str]],
) -> None:
    server, tokens = served
    schema = schemathesis.openapi.from_asgi(
        "/openapi.json", server.api, headers={"Authorization": f"Bearer {tokens[Role.AGENT]}"}
    )
    results = list(schema.get_all_operations())
    broken = [str(r.err()) for r in results if not hasattr(r, "ok")]
    assert not broken, broken
    operations = [r.ok() for r in results]
    assert len(operations) >= 15
    examples = 0
    for operation in operations:
        for role, token in tokens.items():

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(
                case=st.one_of(
                    operation.as_strategy(GenerationMode.POSITIVE),
                    operation.as_strategy(GenerationMode.NEGATIVE),
                )
            )
            def conforms(case: Any) -> None:
                nonlocal examples
                examples += 1
                reply = server.send(case, token)  # noqa: B023 (run before the loop moves on)
                case.validate_response(reply, checks=CHECKS)

            try:
                conforms()
            except Exception as exc:
                raise AssertionError(f"{operation.label} as {role.value}: {exc}") from exc
    print(f"\n{len(operations)} operations, {examples} examples, statuses {dict(server.calls)}")
    assert examples >= len(operations) * 2
