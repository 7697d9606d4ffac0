"""Pivotal: durable sagas for plans proposed by AI agents.

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

from pivotal.app import App, load_app
from pivotal.catalogue import Catalogue, NothingToUndo, Partial, StepContext, StepKind
from pivotal.catalogue import Step as Step
from pivotal.clock import Clock as Clock
from pivotal.clock import FakeClock, SystemClock
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
from pivotal.exposure import Moves, Rates
from pivotal.orchestrator import Orchestrator
from pivotal.outbox import Message
from pivotal.plan import ActorType, Plan, Provenance, parse_plan
from pivotal.plan import ParallelGroup as ParallelGroup
from pivotal.plan import StepCall as StepCall
from pivotal.policy import (
    ApprovalPolicy,
    ApprovalRequirement,
    ExposurePolicy,
    Rollout,
    ThresholdPolicy,
)
from pivotal.retry import RetryPolicy
from pivotal.rules import Agree, AtMost, Check, FromFact, Required, RequiresEarlier
from pivotal.state import ApprovalStatus as ApprovalStatus
from pivotal.state import Event as Event
from pivotal.state import EventType, SagaState, SagaStatus, StepStatus, UndoStatus
from pivotal.state import replay as replay
from pivotal.store import SQLiteStore, Store
from pivotal.store import open_store as open_store
from pivotal.telemetry import Telemetry
from pivotal.validation import ErrorCode, PlanError, validate
from pivotal.worker import Worker, WorkerConfig

if TYPE_CHECKING:
    from pivotal.store.postgres import PostgresStore

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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"PostgresStore"})
