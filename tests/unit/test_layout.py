"""The package's layout, as ``docs/site/explanation/layout.md`` draws it: every part of
``pivotal`` is on the page once, and a module imports, when it is loaded, only from its own
part, from parts the page lists below it, and from the shared top-level modules, which
import no part. Old module paths still give the very module they name now."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import pivotal
from pivotal._moved import MOVED

PACKAGE = Path(pivotal.__file__).parent
PAGE = PACKAGE.parents[1] / "docs" / "site" / "explanation" / "layout.md"


def order() -> list[str]:
    """The parts, top first, as the page's table lists them."""
    return re.findall(r"^\| `pivotal\.(\w+)` \|", PAGE.read_text(), re.M)


def parts() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}


def loaded_imports(path: Path) -> set[str]:
    """The ``pivotal`` modules ``path`` imports when it is loaded (not under
    ``TYPE_CHECKING``, not inside a function)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.Import):
                found |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.module:
                found |= {f"{n.module}.{a.name}" for a in n.names}
    return {name for name in found if name.startswith("pivotal.")}


def part_of(name: str) -> str | None:
    bits = name.split(".")
    return bits[1] if len(bits) > 2 and bits[1] in parts() else None


def test_every_part_is_on_the_page_once() -> None:
    assert sorted(order()) == sorted(parts())
    assert len(order()) == len(set(order()))


def test_a_module_imports_only_its_own_part_and_those_below_it() -> None:
    rank = {name: n for n, name in enumerate(order())}
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = path.relative_to(PACKAGE).parts
        if len(here) < 2:
            continue
        for name in sorted(loaded_imports(path)):
            there = part_of(name)
            if there is not None and rank[there] < rank[here[0]]:
                upward.append(f"{'/'.join(here)} imports {name}")
    assert upward == []


def test_the_shared_top_level_modules_import_no_part() -> None:
    shared = [p for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "_moved.py")]
    assert shared
    for path in shared:
        assert {part_of(n) for n in loaded_imports(path)} <= {None}, path.name
        assert f"`pivotal.{path.stem}`" in PAGE.read_text(), path.name


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_gives_the_very_module_it_names_now(old: str) -> None:
    moved = importlib.import_module(old)
    now = importlib.import_module(MOVED[old])
    assert moved is now
    assert now.__name__ == MOVED[old]
    assert now.__spec__ is not None
    assert now.__spec__.name == MOVED[old]
    parent, _, name = old.rpartition(".")
    assert getattr(importlib.import_module(parent), name) is now


def test_an_unknown_module_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pivotal.no_such_module")
    with pytest.raises(AttributeError):
        _ = pivotal.no_such_module  # type: ignore[attr-defined]
