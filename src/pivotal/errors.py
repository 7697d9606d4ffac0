"""Pivotal's exceptions: one root, stable codes, docstrings as default messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pivotal.declarations.plan_errors import PlanError


class PivotalError(Exception):
    """Pivotal failed."""

    code: ClassVar[str] = "pivotal_error"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or self.code).strip())

    @property
    def message(self) -> str:
        return str(self)


# --- signals a step's action or undo raises -------------------------------------------


class StepError(PivotalError):
    """A step reported a failure."""

    code = "step_error"


class Transient(StepError):
    """A transient failure: the same call may succeed later (retried with the same key)."""

    code = "transient"


class Permanent(StepError):
    """A permanent failure that took no effect: never retried."""

    code = "permanent"


class Abort(StepError):
    """A soft failure: the step's verdict is that the saga must not go on (compensates)."""

    code = "abort"


# --- definition and input errors --------------------------------------------------------


class CatalogueError(PivotalError):
    """The catalogue definition is invalid."""

    code = "catalogue_invalid"


class PlanParseError(PivotalError):
    """The plan is not well-formed JSON of the plan shape."""

    code = "plan_malformed"


class PlanTooLarge(PlanParseError):
    """The plan is larger than Pivotal reads."""

    code = "plan_too_large"


class PlanRejected(PivotalError):
    """The plan failed validation; nothing was executed."""

    code = "plan_rejected"

    def __init__(self, errors: Sequence[PlanError]) -> None:
        self.errors = tuple(errors)
        lines = [f"[{e.code}] {e.where()}: {e.message}" for e in self.errors]
        super().__init__("plan rejected:\n  " + "\n  ".join(lines))


class RolloutRefused(PivotalError):
    """The catalogue's rollout refuses agent plans that expose this much; no saga was
    recorded (a person may submit it, or the rollout be widened). The message is what the
    agent is told; ``detail``, what the plan exposed against which limit, is for people."""

    code = "rollout_refused"

    def __init__(self, message: str | None = None, *, detail: str = "") -> None:
        self.detail = detail
        super().__init__(message)


class RolloutShadowed(PivotalError):
    """The catalogue's rollout keeps agent plans that expose this much in shadow: the plan
    validated and was recorded as shadow planning run ``run_id``; no saga exists, nothing
    runs. Not a failure of the plan: a person decides whether to carry it out. The message
    is what the agent is told; ``detail`` is for people."""

    code = "rollout_shadow"

    def __init__(self, message: str, run_id: str, *, detail: str = "") -> None:
        self.run_id = run_id
        self.detail = detail
        super().__init__(message)


class SagaConflict(PivotalError):
    """A saga with this id already exists with a different plan."""

    code = "saga_conflict"


class SagaNotFound(PivotalError):
    """No saga with this id."""

    code = "saga_not_found"


class SagaNotParked(PivotalError):
    """The saga is not waiting for a person (needs_human)."""

    code = "saga_not_parked"


class SagaUnserved(PivotalError):
    """This process cannot run the saga: its catalogue lacks a step the saga uses, gives
    one another kind, or is not there at all (an older build, during a rolling deploy).
    Nothing ran; the saga waits for a process that serves it."""

    code = "saga_unserved"


class ApprovalError(PivotalError):
    """The saga is not waiting for an approval decision."""

    code = "approval_invalid"


class FourEyesError(ApprovalError):
    """This person may not approve this saga (four-eyes): they submitted it, it was asked
    for on their behalf, or they approved it already. Nothing was recorded."""

    code = "four_eyes"


class StaleApproval(ApprovalError):
    """The plan no longer holds against the trusted facts (the order changed while the
    approval waited), or they could not be read to tell: an approval now would approve
    something else than what was asked. Nothing was recorded; reject it, or decide again
    once the facts match the plan."""

    code = "approval_stale"


class AppLoadError(PivotalError):
    """The application (catalogues and policy) could not be loaded."""

    code = "app_load_failed"


class AppNotFound(AppLoadError):
    """The module an app names is not in any folder Python searches."""

    code = "app_not_found"


# --- ledger errors ----------------------------------------------------------------------


class StoreError(PivotalError):
    """The ledger failed."""

    code = "store_error"


class LeaseLost(StoreError):
    """This worker no longer holds the saga's lease; its write was refused."""

    code = "lease_lost"


class VersionConflict(StoreError):
    """The saga changed since this writer read it (a decision was recorded meanwhile); the
    write was refused. The holder of the lease reloads and goes on."""

    code = "version_conflict"


class LedgerNotFound(StoreError):
    """No ledger exists at this address; it was not created."""

    code = "ledger_not_found"


class StoreUnreachable(StoreError):
    """The ledger's server could not be reached, or refused the connection."""

    code = "store_unreachable"


class SchemaMismatch(StoreError):
    """The ledger's schema version is unknown to this version of Pivotal."""

    code = "schema_mismatch"


class InvalidInput(PivotalError):
    """The input is invalid; nothing was changed."""

    code = "invalid_input"


class OnBehalfOfRequired(InvalidInput):
    """The plan must name the person it is for (``provenance.on_behalf_of``): the token
    that submitted it, or its catalogue for an amount this large, requires it. Nothing was
    recorded."""

    code = "on_behalf_of_required"


class SubjectRequired(InvalidInput):
    """A request to plan and run names no subject (the order, the customer) its catalogue
    says a plan is about: nothing trusted says whose order the plan may touch, so no plan
    is asked for and nothing is recorded."""

    code = "subject_required"


class NameTaken(InvalidInput):
    """This name is a live principal's (compared by canonical name); nothing was created."""

    code = "name_taken"


class MessageError(InvalidInput):
    """An outbox message cannot be kept: its type, its data or its size is wrong."""

    code = "message_invalid"


class ProgressError(InvalidInput):
    """A progress report (``ctx.progress``) cannot be kept: its message or its figures are
    wrong."""

    code = "progress_invalid"
