"""The operating page of the manual (docs/site/how-to/operating.md) names only metrics that
exist."""

from __future__ import annotations

from ops_names import exposed_names, referenced

from manual import page


def test_every_metric_the_operating_page_names_is_exposed() -> None:
    named = referenced(page("how-to/operating.md"))
    assert len(named) > 20
    assert named <= exposed_names(), named - exposed_names()
