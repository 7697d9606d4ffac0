"""The chaos summary explains its abbreviations: every crash-point column has a line in
the table's caption saying where the process died, and what a cell's ``runs/failures``
counts."""

from __future__ import annotations

from pivotal.hooks import Point
from pivotal.testing.report import CELLS, LEGEND, NO_CRASH, SHORT, ChaosReport


def report() -> ChaosReport:
    found = ChaosReport()
    found.cells[("in-process", "paid", NO_CRASH)] = [1, 0]
    found.cells[("in-process", "paid", Point.AFTER_INTENT.value)] = [2, 1]
    found.kinds[("in-process", "crashes only")] = [3, 1]
    found.runs = 3
    return found


def test_every_column_abbreviation_has_a_legend_entry() -> None:
    assert set(SHORT.values()) == set(LEGEND)
    assert all(LEGEND.values())


def test_the_table_caption_explains_each_column_and_the_cells() -> None:
    shown = report().render(width=120)
    assert " ".join(CELLS.split()) in " ".join(shown.split())
    lines = [line.strip() for line in shown.splitlines()]
    width = max(map(len, LEGEND))
    for short, meaning in LEGEND.items():
        assert f"{short:<{width}}  {meaning}" in lines, short


def test_the_legend_is_readable_at_80_columns() -> None:
    shown = report().render(width=80)
    flat = " ".join(shown.split())
    for short, meaning in LEGEND.items():
        assert f"{short} {meaning}" in flat, short
