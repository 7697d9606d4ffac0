"""Pivotal: durable sagas for plans proposed by AI agents.

The package is grouped by role, each part using only the parts under it (a test holds it,
and ``docs/site/explanation/layout.md`` draws it): the surfaces (``cli``, ``client``,
``server``, ``mcp``, ``adk``), ``operations`` (workers, the relay), ``observability``,
``views`` (what each audience is shown), ``planning``, ``orchestration`` (the orchestrator
and a person's acts), ``engine`` (the saga machine), ``admission`` (the one way a plan
becomes a saga), ``store`` (the ledgers), ``declarations`` (catalogues, identities, declared
value, rules, policies, plans), ``people`` and ``sagas`` (a saga as the ledger keeps it).
Modules of the first layout are importable by their old names too (``pivotal.exposure`` is
``pivotal.declarations.exposure``).

The top level holds what an application author uses: catalogues and their steps, plans and
their validation, the orchestrator and workers, the ledgers, approval policies, plan rules,
the saga states and every error. Planning (planners, re-planning, escalations, shadow mode)
lives in ``pivotal.planning``, the chaos harness in ``pivotal.testing``.

``PostgresStore`` is imported on first use, so that ``import pivotal`` loads no database
driver; nor does it load an HTTP client.

A few names imported here as ``X as X`` (``Step``, ``Clock``, ``ParallelGroup``,
``StepCall``, ``ApprovalStatus``, ``Event``, ``replay``, ``open_store``) stay importable from
``pivotal`` for existing code but are not part of ``__all__``: their own modules are where
to find them.
"""

from typing import TYPE_CHECKING

from pivotal import _moved
from pivotal.admission.validation import ErrorCode, PlanError, validate
from pivotal.clock import Clock as Clock
from pivotal.clock import FakeClock, SystemClock
from pivotal.declarations.app import App, load_app
from pivotal.declarations.catalogue import Catalogue, NothingToUndo, Partial, StepContext, StepKind
from pivotal.declarations.catalogue import Step as Step
from pivotal.declarations.exposure import Moves, Rates
from pivotal.declarations.plan import ActorType, Plan, Provenance, parse_plan
from pivotal.declarations.plan import ParallelGroup as ParallelGroup
from pivotal.declarations.plan import StepCall as StepCall
from pivotal.declarations.policy import (
    ApprovalPolicy,
    ApprovalRequirement,
    ExposurePolicy,
    Rollout,
    ThresholdPolicy,
)
from pivotal.declarations.retry import RetryPolicy
from pivotal.declarations.rules import Agree, AtMost, Check, FromFact, Required, RequiresEarlier
from pivotal.engine.telemetry import Telemetry
from pivotal.errors import (
    Abort,
    AppLoadError,
    AppNotFound,
    ApprovalError,
    CatalogueError,
    FourEyesError,
    InvalidInput,
    LeaseLost,
    LedgerNotFound,
    MessageError,
    NameTaken,
    OnBehalfOfRequired,
    Permanent,
    PivotalError,
    PlanParseError,
    PlanRejected,
    PlanTooLarge,
    ProgressError,
    RolloutRefused,
    RolloutShadowed,
    SagaConflict,
    SagaNotFound,
    SagaNotParked,
    SagaUnserved,
    SchemaMismatch,
    StaleApproval,
    StepError,
    StoreError,
    StoreUnreachable,
    SubjectRequired,
    Transient,
    VersionConflict,
)
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import ApprovalStatus as ApprovalStatus
from pivotal.sagas.state import Event as Event
from pivotal.sagas.state import EventType, SagaState, SagaStatus, StepStatus, UndoStatus
from pivotal.sagas.state import replay as replay
from pivotal.store import SQLiteStore, Store
from pivotal.store import open_store as open_store

if TYPE_CHECKING:
    from pivotal.store.postgres import PostgresStore

_moved.install()  # the modules of the first layout, under their old names too

__all__ = [
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


def __getattr__(name: str) -> object:
    """``PostgresStore``, imported (with psycopg) when first asked for."""
    if name == "PostgresStore":
        from pivotal.store.postgres import PostgresStore

        globals()[name] = PostgresStore
        return PostgresStore
    return _moved.attribute(name)  # a module of the first layout, by its old name


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"PostgresStore"})
