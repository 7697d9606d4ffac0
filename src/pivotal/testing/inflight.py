"""Calls in flight: record when every action and undo call starts and ends, and let
something happen while one is in flight (a slow call).

``instrument(app, log, interludes)`` gives a copy of the app whose every action and undo
call is recorded in ``log`` (per idempotency key, with the calling process) and offered to
each interlude twice: before it reaches the provider and after the provider answered,
before the caller hears back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pivotal.clock import Clock
from pivotal.declarations.app import App
from pivotal.declarations.catalogue import Action, Catalogue, Lookup, Step, StepContext, Undo
from pivotal.errors import CatalogueError
from pivotal.testing.probe import CallSpan

if TYPE_CHECKING:
    from pivotal.orchestration.orchestrator import Orchestrator


@dataclass(frozen=True)
class Process:
    """One simulated process of a run: its name in the call log, its orchestrator, whether
    it approves pivots when asked, and the run's call log."""

    name: str
    orchestrator: Orchestrator
    approve: bool = True
    log: CallLog | None = None


CURRENT: ContextVar[Process | None] = ContextVar("pivotal_testing_process", default=None)
"""The simulated process running the current task (set by ``recover``)."""


@contextlib.contextmanager
def running_as(process: Process) -> Iterator[Process]:
    """Calls made in the block (and in tasks it starts) are made by ``process``."""
    token = CURRENT.set(process)
    try:
        yield process
    finally:
        CURRENT.reset(token)


class CallLog:
    """Spans of the calls made through an instrumented app, on one counter of ticks.

    A process whose lease was taken from it is ``fence``d: its calls in flight count as
    over from then on (what it does next is for the ledger's fencing to refuse), and a
    call it starts afterwards is marked ``stale``.
    """

    def __init__(self) -> None:
        self._tick = 0
        self._starts: list[tuple[str, int, str]] = []
        self._ends: dict[int, int] = {}
        self._fenced: dict[str, int] = {}

    def start(self, key: str) -> int:
        """A call with ``key`` starts; returns its token for ``end``."""
        self._tick += 1
        process = CURRENT.get()
        self._starts.append((key, self._tick, process.name if process else ""))
        return len(self._starts) - 1

    def end(self, token: int) -> None:
        """The call returned (or raised); its span covers every tick issued so far."""
        self._ends[token] = self._tick

    def fence(self, process: str) -> None:
        """``process`` lost its lease now."""
        self._fenced.setdefault(process, self._tick)

    def call_spans(self) -> list[CallSpan]:
        """Every recorded call; a fenced process's spans end where it was fenced."""
        spans = []
        for token, (key, start, by) in enumerate(self._starts):
            end = self._ends.get(token)
            fenced = self._fenced.get(by)
            stale = fenced is not None and start > fenced
            if fenced is not None and not stale:
                end = fenced if end is None else min(end, fenced)
            spans.append(CallSpan(key, start, end, by, stale=stale, recorder="harness"))
        return spans


class Interlude(Protocol):
    """Runs while a call is in flight: ``applied`` False before the call reaches the
    provider, True after the provider answered (the reply is on its way)."""

    async def __call__(self, ctx: StepContext, *, undo: bool, applied: bool) -> None: ...


@dataclass
class Stall:
    """The ``occurrence``-th call of step ``index``'s action (its undo with ``undo``) never
    returns: the engine's timeout abandons it. With ``lands``, the provider applies it
    anyway, once the caller has given up (a request still on the wire): it lands late."""

    index: int
    occurrence: int = 1
    undo: bool = False
    lands: bool = False
    fired: bool = False
    _seen: int = 0

    def __str__(self) -> str:
        what = "undo" if self.undo else "action"
        late = "+lands" if self.lands else ""
        return f"stall:{what}:{self.index}:{self.occurrence}{late}"

    def matches(self, ctx: StepContext, undo: bool) -> bool:
        if self.fired or (ctx.index, undo) != (self.index, self.undo):
            return False
        self._seen += 1
        self.fired = self._seen == self.occurrence
        return self.fired

    async def stall(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """Never return; on being abandoned, land the call later when ``lands``."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.lands:
                _LATE.add(asyncio.ensure_future(_contained(call)))
            raise
        raise AssertionError("unreachable")  # pragma: no cover


_LATE: set[asyncio.Future[Any]] = set()  # late landings, kept until they are done


async def _contained(call: Callable[[], Awaitable[Any]]) -> None:
    """A call landing late: what it raises reaches nobody (the caller gave up)."""
    with contextlib.suppress(Exception):
        await call()


async def landed() -> None:
    """Wait until every late landing started so far has landed."""
    while _LATE:
        await asyncio.gather(*list(_LATE), return_exceptions=True)
        _LATE.difference_update([f for f in _LATE if f.done()])


@dataclass(frozen=True)
class Lag:
    """Lookups that lag ``seconds`` (of ``clock``) behind the calls they look for: an
    effect is not found until that long after its call ended. Each step declares the lag
    (``lookup_lag``), as the provider contract asks."""

    clock: Clock
    seconds: float
    ended: dict[str, float] = field(default_factory=dict)  # key -> when its call first ended

    def lagging(self, lookup: Lookup) -> Lookup:
        async def looked_up(args: Any, ctx: StepContext) -> Any:
            found = await lookup(args, ctx)
            if found is not None and self.clock.now() < self.ended.get(ctx.key, 0.0) + self.seconds:
                return None  # there, but not yet seen
            return found

        return looked_up

    def end(self, key: str) -> None:
        self.ended.setdefault(key, self.clock.now())


def instrument(
    app: App,
    log: CallLog,
    interludes: Sequence[Interlude] = (),
    stalls: Sequence[Stall] = (),
    *,
    call_timeout: float | None = None,
    lag: Lag | None = None,
    without: str | None = None,
) -> App:
    """A copy of ``app`` (same catalogues, steps and policies) whose calls go through
    ``log``, ``interludes`` and ``stalls`` (with every call bounded by ``call_timeout``,
    when given, instead of the catalogue's: each step's own ``timeout``; what else the
    catalogue bounds, the app's code asked while validating, keeps its bound), whose lookups
    lag by ``lag``, and without the step ``without`` (an older build; a catalogue that is
    not whole without it is left out altogether). Preconditions and policies are left as
    they are."""
    catalogues = []
    for catalogue in app:
        copy = Catalogue(
            catalogue.name,
            catalogue.description,
            approval=catalogue.approval,
            default_timeout=catalogue.default_timeout,
            max_timeout=max(catalogue.max_timeout, call_timeout or 0.0),
            doubt_grace=catalogue.doubt_grace,
        )
        for step in catalogue:
            if step.name == without:
                continue
            instrumented = _instrumented(step, log, tuple(interludes), tuple(stalls), lag)
            if call_timeout is not None:
                instrumented = dataclasses.replace(instrumented, timeout=call_timeout)
            if lag is not None and step.lookup is not None:
                instrumented = dataclasses.replace(
                    instrumented,
                    lookup=lag.lagging(step.lookup),
                    lookup_lag=max(step.lookup_lag, lag.seconds),
                )
            copy.add(instrumented)
        if without is not None and without in catalogue:
            try:
                copy.check()
            except CatalogueError:  # e.g. its approval policy looked at that step only
                continue
        catalogues.append(copy)
    return App(catalogues, name=app.name)


def _instrumented(
    step: Step,
    log: CallLog,
    interludes: tuple[Interlude, ...],
    stalls: tuple[Stall, ...],
    lag: Lag | None = None,
) -> Step:
    action, undo = step.action, step.undo

    async def around(ctx: StepContext, is_undo: bool, call: Callable[[], Awaitable[Any]]) -> Any:
        token = log.start(ctx.key)
        if lag is not None and not is_undo:
            inner = call

            async def ended() -> Any:
                try:
                    return await inner()
                finally:
                    lag.end(ctx.key)

            call = ended
        try:
            for interlude in interludes:
                await interlude(ctx, undo=is_undo, applied=False)
            stalled = next((s for s in stalls if s.matches(ctx, is_undo)), None)
            if stalled is not None:
                return await stalled.stall(call)
            try:
                result = await call()
            except Exception:
                for interlude in interludes:
                    await interlude(ctx, undo=is_undo, applied=True)
                raise
            for interlude in interludes:
                await interlude(ctx, undo=is_undo, applied=True)
            return result
        finally:
            log.end(token)

    async def recorded_action(args: Any, ctx: StepContext) -> Any:
        return await around(ctx, False, lambda: action(args, ctx))

    wrapped_undo: Undo | None = None
    if undo is not None:
        inner_undo = undo

        async def recorded_undo(args: Any, result: Any, ctx: StepContext) -> str | None:
            note: str | None = await around(ctx, True, lambda: inner_undo(args, result, ctx))
            return note

        wrapped_undo = recorded_undo
    wrapped_action: Action = recorded_action
    return dataclasses.replace(step, action=wrapped_action, undo=wrapped_undo)
