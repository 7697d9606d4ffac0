"""One store protocol for everything the ledger keeps, sagas and planning records alike,
implemented once in SQL for both backends; the store never imports planning, and its SQL
is named in one module."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pivotal.store.base import Store
from pivotal.store.postgres import PostgresStore
from pivotal.store.sql import SQLStore
from pivotal.store.sqlite import SQLiteStore

STORE = Path(__file__).resolve().parents[2] / "src" / "pivotal" / "store"
PLANNING_OPERATIONS = (
    "record_run",
    "escalate",
    "runs",
    "latest_batch",
    "escalations",
    "escalation",
    "close_escalation",
)
# Modules whose statements must all come from queries.py (sqlite.py's connection and
# migration bookkeeping are its own).
NAMED_ONLY = ("sql.py", "sql_planning.py", "postgres.py", "rows.py", "primitives.py")
SQL_START = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "CREATE ", "BEGIN", "COMMIT", "TRUNCATE")


def protocol_operations() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(Store).items()
        if inspect.iscoroutinefunction(member) and not name.startswith("_")
    }


def test_planning_records_are_operations_of_the_store_protocol() -> None:
    operations = protocol_operations()
    assert set(PLANNING_OPERATIONS) <= set(operations)
    assert {"create", "commit", "claim_next", "dead_letters"} <= set(operations)


@pytest.mark.parametrize("backend", [SQLiteStore, PostgresStore])
def test_every_backend_implements_every_operation_from_the_one_sql_layer(
    backend: type[SQLStore],
) -> None:
    for name, signature in protocol_operations().items():
        implemented = getattr(backend, name)
        assert inspect.iscoroutinefunction(implemented), name
        assert inspect.signature(implemented) == signature, name
    for name in PLANNING_OPERATIONS:  # written once, not per backend
        assert name not in vars(backend), name


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, lazily or not."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_store_never_imports_planning() -> None:
    for path in STORE.glob("*.py"):
        planning = {m for m in imports_of(path) if m.startswith("pivotal.planning")}
        assert not planning, (path.name, planning)
    probe = (
        "import json, sys\n"
        "import pivotal.store, pivotal.store.sql, pivotal.store.postgres, pivotal.store.sqlite\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pivotal.planning'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def string_constants(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return out


@pytest.mark.parametrize("module", NAMED_ONLY)
def test_statements_are_named_in_queries_not_written_inline(module: str) -> None:
    inline = [
        text
        for text in string_constants(STORE / module)
        if text.lstrip().startswith(SQL_START)  # statements are written in capitals
    ]
    assert inline == []
