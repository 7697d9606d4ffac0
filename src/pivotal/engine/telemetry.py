"""What the engine tells observers: committed changes, passes, calls, lost leases.

``Telemetry`` is a base class whose methods do nothing; metrics
(``pivotal.observability.metrics``), traces (``pivotal.observability.tracing``) and log
fields (``pivotal.observability.logs``) override what they need. The engine calls them
through ``Observers``, which contains whatever an observer raises: a broken exporter never
stops a saga, it is logged and the work goes on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pivotal.sagas.state import Event, SagaState

log = logging.getLogger("pivotal.telemetry")
_NOTHING: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


@dataclass
class Call:
    """One call of an action or an undo, as observers see it. The engine sets ``outcome``
    when the call returns; an observer may set ``traceparent`` on entering so that the
    step's own calls (through ``ctx.traceparent``) join its trace."""

    saga_id: str
    catalogue: str
    step: str
    index: int
    key: str
    attempt: int
    undo: bool = False
    traceparent: str | None = None  # the saga's trace context, then the call's own
    outcome: str = "unknown"  # succeeded, transient, permanent, abort, unknown, timeout


class Telemetry:
    """An observer of the engine. Every method may be overridden; none is required."""

    def committed(
        self, before: SagaState | None, after: SagaState, events: Sequence[Event]
    ) -> None:
        """The ledger acknowledged ``events`` (``before`` is None for a new saga)."""

    def saga_pass(self, state: SagaState, owner: str) -> contextlib.AbstractContextManager[None]:
        """Around one pass over a saga by ``owner``."""
        return _NOTHING

    def call(self, call: Call) -> contextlib.AbstractContextManager[None]:
        """Around one call of an action or an undo."""
        return _NOTHING

    def lease_lost(self, saga_id: str, owner: str) -> None:
        """``owner`` lost the lease of ``saga_id`` (another holder took it over)."""

    def unserved(self, state: SagaState, owner: str, reason: str) -> None:
        """``owner`` gave the saga back without running anything: it cannot serve it
        (``reason``: a step its catalogue lacks, or has of another kind; a rolling deploy)."""

    def traceparent(self) -> str | None:
        """The current trace context."""
        return None

    def submission_trace(self, saga_id: str) -> str | None:
        """The trace context recorded with the saga submitted now, which every pass of it
        joins: the current one, by default."""
        return self.traceparent()


class Observers(Telemetry):
    """Several observers as one; each call into one of them is contained."""

    def __init__(self, observers: Sequence[Telemetry] = ()) -> None:
        self.observers = tuple(observers)

    def __bool__(self) -> bool:
        return bool(self.observers)

    def committed(
        self, before: SagaState | None, after: SagaState, events: Sequence[Event]
    ) -> None:
        for o in self.observers:
            try:
                o.committed(before, after, events)
            except Exception:
                log.exception("observer %s failed on a commit of saga %s", o, after.saga_id)

    def saga_pass(self, state: SagaState, owner: str) -> contextlib.AbstractContextManager[None]:
        if not self.observers:  # nothing to tell: no frame kept per pass
            return _NOTHING
        return self._saga_pass(state, owner)

    def call(self, call: Call) -> contextlib.AbstractContextManager[None]:
        if not self.observers:
            return _NOTHING
        return self._call(call)

    @contextlib.contextmanager
    def _saga_pass(self, state: SagaState, owner: str) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for o in self.observers:
                _enter(stack, o, o.saga_pass(state, owner))
            yield

    @contextlib.contextmanager
    def _call(self, call: Call) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for o in self.observers:
                _enter(stack, o, o.call(call))
            yield

    def lease_lost(self, saga_id: str, owner: str) -> None:
        for o in self.observers:
            try:
                o.lease_lost(saga_id, owner)
            except Exception:
                log.exception("observer %s failed on a lost lease", o)

    def unserved(self, state: SagaState, owner: str, reason: str) -> None:
        for o in self.observers:
            try:
                o.unserved(state, owner, reason)
            except Exception:
                log.exception("observer %s failed on a refused saga %s", o, state.saga_id)

    def traceparent(self) -> str | None:
        return self._first("traceparent", lambda o: o.traceparent())

    def submission_trace(self, saga_id: str) -> str | None:
        return self._first("submission_trace", lambda o: o.submission_trace(saga_id))

    def _first(self, what: str, ask: Callable[[Telemetry], str | None]) -> str | None:
        """The first trace context an observer gives (one that raises is skipped)."""
        for o in self.observers:
            try:
                found = ask(o)
            except Exception:
                log.exception("observer %s failed to give the trace context (%s)", o, what)
                continue
            if found:
                return found
        return None


def _enter(
    stack: contextlib.ExitStack, observer: Telemetry, cm: contextlib.AbstractContextManager[None]
) -> None:
    """Enter ``cm`` on ``stack`` so that neither its entry nor its exit can raise into the
    engine, and its exit never swallows the engine's own exception."""
    try:
        cm.__enter__()
    except Exception:
        log.exception("observer %s failed to start observing", observer)
        return

    def leave(exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        try:
            cm.__exit__(exc_type, exc, tb)  # type: ignore[arg-type]
        except Exception:
            log.exception("observer %s failed to finish observing", observer)
        return False

    stack.push(leave)
