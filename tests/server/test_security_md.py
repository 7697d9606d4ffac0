"""SECURITY.md's role table names every power of every role: each route a role may act
through (``test_route_authz.TABLE``, the table the suite walks) appears in its row."""

from __future__ import annotations

import re
from pathlib import Path

from test_route_authz import ADMIN, TABLE

from pivotal.people.principals import Role

# -- SECURITY.md's role table names every power ----------------------------------------------

# what a route's last segment is called in SECURITY.md's role table
POWER = {
    "validate": "validate",
    "sagas": "submit",
    "approve": "approve",
    "reject": "reject",
    "retry": "retry",
    "resolve": "resolve",
    "resume": "resume",
    "abort": "abort",
    "rerun": "re-run",
    "bulk": "many sagas at once",
    "fork": "fork",
    "events": "event log",
    "workers": "workers view",
    "report": "report",
    "searches": "saved searches",
}
# the segments whose reading is a power of its own (every other GET is "read")
READ_POWERS = ("events", "workers", "report", "searches")


def security_rows() -> dict[Role, str]:
    text = (Path(__file__).parents[2] / "SECURITY.md").read_text()
    rows = {}
    for role in Role:
        found = re.search(rf"^\| `{role.value}` \| (.*) \|$", text, re.M)
        assert found, f"SECURITY.md's role table has no row for {role.value}"
        rows[role] = found[1]
    return rows


def test_security_md_names_every_power_of_every_role() -> None:
    rows = security_rows()
    missing = []
    for (method, path), row in TABLE.items():
        # the route's last segment that is not a parameter: /v1/searches/{name} is searches
        last = ([s for s in path.split("/") if s and not s.startswith("{")] or [""])[-1]
        acts = method in ("POST", "PUT", "DELETE") or last in READ_POWERS
        if row.kind != "token" or not acts or last not in POWER:
            continue
        for role in row.allowed - {ADMIN}:
            if POWER[last] not in rows[role]:
                missing.append(f"{role.value}: {POWER[last]} ({method} {path})")
    assert missing == [], "SECURITY.md's role table does not say: " + "; ".join(missing)
