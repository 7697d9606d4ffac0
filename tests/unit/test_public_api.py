"""The top level exports what an application author uses, and nothing planning-specific;
every name existing code imports from ``pivotal`` still resolves."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import pivotal
import pivotal.errors
import pivotal.planning
import pivotal.testing

ROOT = Path(__file__).resolve().parents[2]

CURATED = [
    # catalogues, apps and plans
    "App",
    "Catalogue",
    "StepContext",
    "StepKind",
    "NothingToUndo",
    "Partial",
    "load_app",
    "Plan",
    "Provenance",
    "ActorType",
    "parse_plan",
    "validate",
    "PlanError",
    "ErrorCode",
    # rules over a whole plan
    "Agree",
    "AtMost",
    "Check",
    "FromFact",
    "Required",
    "RequiresEarlier",
    # approval and retries
    "ApprovalPolicy",
    "ApprovalRequirement",
    "ExposurePolicy",
    "Moves",
    "Rates",
    "Rollout",
    "ThresholdPolicy",
    "RetryPolicy",
    # running sagas
    "Orchestrator",
    "Worker",
    "WorkerConfig",
    "FakeClock",
    "SystemClock",
    # operating
    "Telemetry",
    "Message",
    # ledgers
    "Store",
    "SQLiteStore",
    "PostgresStore",
    # saga state
    "SagaState",
    "SagaStatus",
    "StepStatus",
    "UndoStatus",
    "EventType",
    # errors
    "PivotalError",
    "StepError",
    "Transient",
    "Permanent",
    "Abort",
    "CatalogueError",
    "PlanParseError",
    "PlanTooLarge",
    "PlanRejected",
    "RolloutRefused",
    "RolloutShadowed",
    "SagaConflict",
    "SagaNotFound",
    "SagaNotParked",
    "SagaUnserved",
    "ApprovalError",
    "FourEyesError",
    "StaleApproval",
    "AppLoadError",
    "AppNotFound",
    "InvalidInput",
    "OnBehalfOfRequired",
    "NameTaken",
    "SubjectRequired",
    "StoreError",
    "StoreUnreachable",
    "LedgerNotFound",
    "LeaseLost",
    "VersionConflict",
    "SchemaMismatch",
    "MessageError",
    "ProgressError",
]
# Importable from ``pivotal`` for existing code, but not part of ``__all__``.
KEPT_FOR_COMPATIBILITY = [
    "ApprovalStatus",
    "Clock",
    "Event",
    "ParallelGroup",
    "Step",
    "StepCall",
    "open_store",
    "replay",
]


def test_all_is_exactly_the_curated_list_and_every_name_resolves() -> None:
    assert pivotal.__all__ == CURATED
    assert len(set(pivotal.__all__)) == len(pivotal.__all__)
    for name in [*CURATED, *KEPT_FOR_COMPATIBILITY]:
        assert getattr(pivotal, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from pivotal import *", namespace)
    assert set(CURATED) <= set(namespace)
    assert not set(KEPT_FOR_COMPATIBILITY) & set(namespace)


def test_the_postgres_store_is_the_store_module_s_own() -> None:
    from pivotal.store.postgres import PostgresStore

    assert pivotal.PostgresStore is PostgresStore
    assert "PostgresStore" in dir(pivotal)


def test_every_error_pivotal_raises_is_exported() -> None:
    errors = {
        name
        for name, value in vars(pivotal.errors).items()
        if inspect.isclass(value)
        and issubclass(value, pivotal.PivotalError)
        and value.__module__ == "pivotal.errors"
    }
    assert errors <= set(pivotal.__all__), errors - set(pivotal.__all__)


def test_planning_names_live_in_pivotal_planning() -> None:
    planning_names = {"OpenAIPlanner", "OpenAIConfig", "PlanRequest", "plan_and_submit"}
    assert not planning_names & set(pivotal.__all__)
    for name in pivotal.planning.__all__:
        assert getattr(pivotal.planning, name) is not None, name
    for name in pivotal.testing.__all__:
        assert getattr(pivotal.testing, name) is not None, name


def _imported_from_pivotal() -> dict[str, set[str]]:
    """Every ``from pivotal import NAME`` in the project's code, with the files doing it."""
    found: dict[str, set[str]] = {}
    for folder in ("src", "tests", "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            try:
                tree = ast.parse(path.read_text())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "pivotal" and not node.level:
                    for alias in node.names:
                        found.setdefault(alias.name, set()).add(str(path.relative_to(ROOT)))
    return found


def _is_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def test_every_name_the_project_imports_from_pivotal_resolves() -> None:
    imported = _imported_from_pivotal()
    assert imported  # the scan found the project's imports
    missing = {
        name: sorted(files)
        for name, files in imported.items()
        if name != "*" and not hasattr(pivotal, name) and not _is_module(f"pivotal.{name}")
    }
    assert not missing
