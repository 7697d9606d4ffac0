"""Metric names: what a ``PivotalMetrics`` registry exposes and what an expression uses."""

from __future__ import annotations

import re

from pivotal.observability.metrics import PivotalMetrics

NAME = re.compile(r"\bpivotal_[a-zA-Z0-9_]+")
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def exposed_names() -> set[str]:
    """Every family and sample name of a fresh registry (with the histogram and counter
    suffixes a query may use), gauges without samples included."""
    names: set[str] = set()
    for family in PivotalMetrics().registry.collect():
        names.add(family.name)
        kind = family.type
        if kind == "counter":
            names.add(family.name + "_total")
        elif kind == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    return names


def referenced(expr: str) -> set[str]:
    """The ``pivotal_*`` metric names a PromQL expression uses."""
    return set(NAME.findall(expr))
