"""Pivotal: durable sagas for plans proposed by AI agents."""

from pivotal.app import App, load_app
from pivotal.catalogue import Catalogue, Step, StepContext, StepKind
from pivotal.clock import Clock, FakeClock, SystemClock
from pivotal.errors import (
    Abort,
    AppLoadError,
    ApprovalError,
    CatalogueError,
    InvalidInput,
    LeaseLost,
    Permanent,
    PivotalError,
    PlanParseError,
    PlanRejected,
    SagaConflict,
    SagaNotFound,
    SchemaMismatch,
    StoreError,
    Transient,
)
from pivotal.orchestrator import Orchestrator
from pivotal.plan import ActorType, ParallelGroup, Plan, Provenance, StepCall, parse_plan
from pivotal.policy import ApprovalPolicy, ApprovalRequirement, ThresholdPolicy
from pivotal.retry import RetryPolicy
from pivotal.state import (
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepStatus,
    UndoStatus,
    replay,
)
from pivotal.store import SQLiteStore, Store, open_store
from pivotal.validation import ErrorCode, PlanError, validate

__all__ = [
    "Abort",
    "ActorType",
    "App",
    "AppLoadError",
    "ApprovalError",
    "ApprovalPolicy",
    "ApprovalRequirement",
    "ApprovalStatus",
    "Catalogue",
    "CatalogueError",
    "Clock",
    "ErrorCode",
    "Event",
    "EventType",
    "FakeClock",
    "InvalidInput",
    "LeaseLost",
    "Orchestrator",
    "ParallelGroup",
    "Permanent",
    "PivotalError",
    "Plan",
    "PlanError",
    "PlanParseError",
    "PlanRejected",
    "Provenance",
    "RetryPolicy",
    "SQLiteStore",
    "SagaConflict",
    "SagaNotFound",
    "SagaState",
    "SagaStatus",
    "SchemaMismatch",
    "Step",
    "StepCall",
    "StepContext",
    "StepKind",
    "StepStatus",
    "Store",
    "StoreError",
    "SystemClock",
    "ThresholdPolicy",
    "Transient",
    "UndoStatus",
    "load_app",
    "open_store",
    "parse_plan",
    "replay",
    "validate",
]
