"""A plan holding an integer too long to read is a 422 in the API's JSON error shape on
every route that reads a plan, never a 500."""

from __future__ import annotations

import pytest
from server_api import Clients

from pivotal.people.principals import Role

LONG = (
    '{"catalogue":"checkout","steps":[{"name":"reserve_inventory","args":'
    '{"sku":"sku-1","quantity":%s}}]}' % ("9" * 5000)
)


@pytest.mark.parametrize("path", ["/v1/plans/validate", "/v1/sagas", "/v1/sagas?saga_id=s1"])
async def test_a_long_integer_is_a_422_in_the_json_error_shape(as_role: Clients, path: str) -> None:
    answer = await as_role[Role.AGENT].post(path, content=LONG)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == "plan_malformed"
    assert "5000 digits" in error["message"]
