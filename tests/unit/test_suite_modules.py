"""The suite's own layout: pytest imports every test module by its file's name (its folders
have no ``__init__.py``), so two modules of one name in two folders cannot both be collected
in one run; the second is an error that only a whole run shows."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).parents[1]


def test_no_two_modules_of_the_suite_share_a_name() -> None:
    found: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name not in ("conftest.py", "__init__.py"):
            found[path.name].append(path.relative_to(TESTS).as_posix())
    shared = {name: paths for name, paths in found.items() if len(paths) > 1}
    assert shared == {}
