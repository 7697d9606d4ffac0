"""The README's operations section names only metrics that exist."""

from __future__ import annotations

from pathlib import Path

from ops_names import exposed_names, referenced

README = Path(__file__).parents[2] / "README.md"


def test_every_metric_the_readme_names_is_exposed() -> None:
    text = README.read_text()
    section = text[text.index("## Operating Pivotal") : text.index("## Benchmarks")]
    named = referenced(section)
    assert len(named) > 20
    assert named <= exposed_names(), named - exposed_names()
