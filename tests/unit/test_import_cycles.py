"""The package's modules import one another without a circle: every import counts (at the
top, inside a function, under ``TYPE_CHECKING``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pivotal

ROOT = Path(pivotal.__file__).parent


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def graph() -> dict[str, set[str]]:
    """Each module and the modules of the package it imports."""
    mods = modules()

    def owner(name: str) -> str | None:  # the module ``name`` is, or is in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        base = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                prefix = node.module or ""
                if node.level:
                    up = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                    prefix = f"{up}.{prefix}" if prefix else up
                subs = [f"{prefix}.{a.name}" for a in node.names]
                names = [n for n in subs if n in mods] or [prefix]
            else:
                continue
            for name in names:
                target = owner(name) if name.startswith("pivotal") else None
                if target is not None and target != mod:
                    edges[mod].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    edges = graph()
    assert (
        "pivotal.orchestration.rerun" in edges["pivotal.orchestration.orchestrator"]
    )  # at the top
    assert (
        "pivotal.orchestration.orchestrator" in edges["pivotal.views.saga_actions"]
    )  # under TYPE_CHECKING
    assert "pivotal.declarations.policy" in edges["pivotal.declarations.catalogue"]


def test_no_import_circle() -> None:
    assert [sorted(c) for c in cycles(graph())] == []
