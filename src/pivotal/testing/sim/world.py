"""One run's providers: how each call goes (the faults drawn for it from the run's seed),
what it does to the providers' books (``Bank``), and what a person does by hand; and the
simulated catalogue, whose steps call the providers of the run under way (``WORLD``)."""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pivotal.declarations.catalogue import Catalogue, NothingToUndo, StepContext
from pivotal.declarations.exposure import Moves
from pivotal.declarations.policy import ThresholdPolicy, Window
from pivotal.declarations.retry import RetryPolicy
from pivotal.errors import Abort, Permanent, Transient
from pivotal.testing.sim import hosts
from pivotal.testing.sim.bank import Bank, Effect, Span
from pivotal.testing.sim.loop import now
from pivotal.testing.sim.providers import (
    APPROVAL_ABOVE,
    APPROVAL_FOR,
    GRACE,
    LAG,
    PROVIDERS,
    TIMEOUT,
    Call,
    Fault,
)

FAULTS = tuple(Fault)[1:]  # every fault a call may meet
# what an action may meet: one past the point of no return does not give up (Abort)
AFTER_NO_RETURN = tuple(f for f in FAULTS if f is not Fault.ABORT)


class SdkTimeout(TimeoutError):
    """A client library's own timeout: the request may be on its way."""


@dataclass(frozen=True)
class Profile:
    """How often a run's provider calls meet a fault, and which."""

    faults: float  # the chance a call meets any
    weights: tuple[float, ...]  # of each of ``FAULTS``, when it meets one
    lookup_fails: float  # the chance a flaky lookup raises
    lands: float  # the chance a call cut off (hung, or its host gone) lands later

    @classmethod
    def draw(cls, rng: random.Random) -> Profile:
        return cls(
            faults=rng.choice((0.05, 0.15, 0.3, 0.5)),
            weights=tuple(rng.choice((0.0, 1.0, 3.0)) for _ in FAULTS),
            lookup_fails=rng.choice((0.0, 0.3, 0.8)),
            lands=rng.choice((0.0, 0.5, 1.0)),
        )


QUIET = Profile(0.0, tuple(0.0 for _ in FAULTS), 0.0, 0.0)


class World:
    """The providers of one run."""

    def __init__(self, rng: random.Random, profile: Profile) -> None:
        self.rng = rng
        self.profile = profile
        self.bank = Bank()
        self.late: set[asyncio.TimerHandle] = set()  # landings to come

    # -- what a call meets -------------------------------------------------------------

    def _fault(self, kinds: tuple[Fault, ...]) -> Fault:
        p = self.profile
        if not p.faults or self.rng.random() >= p.faults:
            return Fault.NONE
        weights = [p.weights[FAULTS.index(k)] for k in kinds]
        if not any(weights):
            return Fault.NONE
        return self.rng.choices(kinds, weights)[0]

    def _begin(self, key: str, ctx: StepContext) -> Span:
        """A call of ``key`` reaches its provider: from a host that holds the saga's
        lease, or a violation is noted (the ledger is read, never the host's belief)."""
        host = hosts.current()
        if host is None:
            return self.bank.begin(key, "?", now())
        host.check()
        span = self.bank.begin(key, host.name, now())
        found = host.store.lease_row(ctx.saga_id)
        owner, _, expires = found if found is not None else (None, 0, None)
        if owner != host.orchestrator.owner or expires is None or expires < now():
            self.bank.note(
                f"{host.name} called {key} at {now():.3f} without the saga's lease (the "
                f"ledger has it held by {owner!r} until {expires})"
            )
        return span

    def _later(self, land: Callable[..., Any], *args: Any) -> None:
        """The request is on its way: it lands within the grace its provider promises."""
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def landing() -> None:
            self.late.discard(handle)
            land(*args)

        handle = loop.call_later(self.rng.uniform(0.0, GRACE), landing)
        self.late.add(handle)

    async def _work(self, fault: Fault) -> None:
        """The provider at work on a call: a while, or for ever (cut off by its bound)."""
        await asyncio.sleep(self.rng.uniform(0.0, 0.2))
        if fault is Fault.HANGS:
            await asyncio.sleep(TIMEOUT * 100)

    async def _progress(self, ctx: StepContext, done: int) -> None:
        """A long call reports how far it got (an abort stops it here: ``Cancelled``)."""
        await asyncio.sleep(self.rng.uniform(0.0, TIMEOUT / 4))
        await ctx.progress("working", done=done, total=2)

    @staticmethod
    def _raise_before(fault: Fault, what: str) -> None:
        if fault is Fault.REFUSED:
            raise Permanent(f"{what}: refused")
        if fault is Fault.ABORT:
            raise Abort(f"{what}: gave up")
        if fault is Fault.TRANSIENT:
            raise Transient(f"{what}: unavailable")
        if fault is Fault.UNDECLARED:
            raise RuntimeError(f"{what}: the client failed before sending")

    @staticmethod
    def _raise_after(fault: Fault, what: str) -> None:
        if fault is Fault.LOST_REPLY:
            raise SdkTimeout(f"{what}: reply lost after it was done")
        if fault is Fault.UNDECLARED_AFTER:
            raise KeyError(f"{what}: the reply has no id")

    # -- the action ----------------------------------------------------------------------

    def _made(self, effect: Effect, by: str) -> None:
        provider = PROVIDERS[effect.step]
        if by == "provider" and provider.replays and effect.applied:
            return  # the same key again: the first reply, nothing new
        effect.made.append((now(), by))
        if by == "provider":
            effect.applied = True
            effect.provider_has += 1
            if effect.seen_at is None:
                lag = self.rng.uniform(0.0, LAG) if provider.lookup == "lagging" else 0.0
                effect.seen_at = now() + lag

    def _landed(self, effect: Effect) -> None:
        effect.pending -= 1
        self._made(effect, "provider")

    @staticmethod
    def may_make(effect: Effect) -> bool:
        """Whether a call of the action still on its way may make an effect: one that lands
        at a provider that replays a key it applied makes none."""
        return effect.pending > 0 and not (PROVIDERS[effect.step].replays and effect.applied)

    async def act(self, step: str, ctx: StepContext) -> dict[str, Any]:
        effect = self.bank.of(ctx.key, step)
        span = self._begin(ctx.key, ctx)
        provider = PROVIDERS[step]
        fault = self._fault(FAULTS if provider.kind == "compensable" else AFTER_NO_RETURN)
        sent = False
        try:
            if provider.reports and fault is not Fault.HANGS and self.rng.random() < 0.5:
                await self._progress(ctx, 1)  # nothing made yet
                self._raise_before(fault, step)
                sent = True
                self._made(effect, "provider")
                await self._progress(ctx, 2)  # the effect is made
                self._raise_after(fault, step)
                return {"id": ctx.key}
            await self._work(fault)
            self._raise_before(fault, step)
            sent = True
            if fault is Fault.LANDS_LATER:
                effect.pending += 1
                self._later(self._landed, effect)
                raise SdkTimeout(f"{step}: no reply in time")
            self._made(effect, "provider")
            self._raise_after(fault, step)
            return {"id": ctx.key}
        except (asyncio.CancelledError, hosts.HostGone):
            # cut off by its bound, or its host went away: the request may be on its way
            if not sent and self.rng.random() < self.profile.lands:
                effect.pending += 1
                self._later(self._landed, effect)
            raise
        finally:
            self.bank.end(span, now())

    # -- the lookup ----------------------------------------------------------------------

    async def lookup(self, step: str, ctx: StepContext) -> dict[str, Any] | None:
        effect = self.bank.of(ctx.key, step)
        host = hosts.current()
        if host is not None:
            host.check()
        await asyncio.sleep(self.rng.uniform(0.0, 0.05))
        if PROVIDERS[step].lookup == "flaky" and self.rng.random() < self.profile.lookup_fails:
            effect.lookup_failed = True
            raise RuntimeError(f"{step}: the lookup failed")
        if effect.provider_has and effect.seen_at is not None and now() >= effect.seen_at:
            return {"id": ctx.key}
        return None

    # -- the undo ------------------------------------------------------------------------

    def _undone(self, effect: Effect, undo_key: str, pending: bool) -> str:
        """The undo with ``undo_key`` lands: it moves back what the provider's books hold
        (once per undo key), or finds nothing."""
        if pending:
            effect.pending_undo -= 1
        if undo_key in effect.undo_keys:
            return "done already"  # the same undo key again: the first reply
        effect.undo_keys.add(undo_key)
        if self.may_make(effect):
            self.bank.note(f"the undo {undo_key} landed while its action could still land")
        if effect.provider_has:
            effect.provider_has -= 1
            effect.undone.append((now(), "provider"))
            return "moved back"
        effect.undone_nothing.append(now())
        return NothingToUndo("nothing to undo")

    async def undo(self, step: str, ctx: StepContext) -> str:
        effect = self.bank.of(ctx.action_key, step)
        span = self._begin(ctx.key, ctx)
        if self.may_make(effect):
            self.bank.note(f"{ctx.key} was called while its action could still land")
        fault = self._fault(FAULTS)
        sent = False
        try:
            await self._work(fault)
            self._raise_before(fault, f"{step} undo")
            sent = True
            if fault is Fault.LANDS_LATER:
                effect.pending_undo += 1
                self._later(self._undone, effect, ctx.key, True)
                raise SdkTimeout(f"{step} undo: no reply in time")
            note = self._undone(effect, ctx.key, False)
            self._raise_after(fault, f"{step} undo")
            return note
        except (asyncio.CancelledError, hosts.HostGone):
            if not sent and self.rng.random() < self.profile.lands:
                effect.pending_undo += 1
                self._later(self._undone, effect, ctx.key, True)
            raise
        finally:
            self.bank.end(span, now())

    # -- a person's hand -----------------------------------------------------------------

    def by_hand(self, key: str, step: str, *, undo: bool) -> None:
        """A person makes the effect of ``key``, or moves it back, outside the provider,
        where what the provider's books and the earlier hands show calls for it."""
        effect = self.bank.of(key, step)
        if undo and effect.net > 0:
            effect.undone.append((now(), "hand"))
        elif not undo and effect.net <= 0:
            effect.made.append((now(), "hand"))


# -- the catalogue ---------------------------------------------------------------------------

WORLD: contextvars.ContextVar[World] = contextvars.ContextVar("pivotal_sim_world")


async def _act(step: str, args: Call, ctx: StepContext) -> dict[str, Any]:
    return await WORLD.get().act(step, ctx)


async def _undo(step: str, args: Call, result: Any, ctx: StepContext) -> str:
    return await WORLD.get().undo(step, ctx)


async def _lookup(step: str, args: Call, ctx: StepContext) -> dict[str, Any] | None:
    return await WORLD.get().lookup(step, ctx)


def _for(fn: Callable[..., Awaitable[Any]], step: str) -> Callable[..., Awaitable[Any]]:
    async def bound(*args: Any) -> Any:
        return await fn(step, *args)

    bound.__name__ = step
    return bound


def catalogue() -> Catalogue:
    """The simulated catalogue: five compensable steps (one takes money, two are repeated
    before an undo in doubt), a pivot that takes money and may wait for a person (also
    for what other sagas of its account hold reserved), and two retriable steps."""
    made = Catalogue(
        "sim",
        "Steps over simulated providers.",
        default_timeout=TIMEOUT,
        doubt_grace=GRACE,
        recheck_after=30.0,
        approval=ThresholdPolicy(
            threshold=APPROVAL_ABOVE,
            steps=frozenset({"capture"}),
            expires_in=APPROVAL_FOR,
            across=Window("account", seconds=3600.0),
        ),
    )
    quick = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=4.0)
    letters = RetryPolicy(max_attempts=2, base_delay=20.0, max_delay=40.0)
    pays = Moves("amount", per=("account",), currency="EUR")
    for name, provider in PROVIDERS.items():
        options: dict[str, Any] = {"retry": quick, "args": Call, "description": name}
        if provider.lookup != "none":
            options["lookup"] = _for(_lookup, name)
        if provider.lookup == "lagging":
            options["lookup_lag"] = LAG
        if not provider.replays:
            options["repeatable"] = False
        if provider.moves:
            options["moves"] = pays
        action = _for(_act, name)
        if provider.kind == "pivot":
            made.pivot(**options)(action)
        elif provider.kind == "retriable":
            made.retriable(**options)(action)
        else:
            made.compensable(
                undo=_for(_undo, name),
                undo_retry=quick,
                dead_letter_retry=letters,
                repeat_before_undo=provider.settles_first,
                **options,
            )(action)
    return made
