"""Simulated payment providers, on a fake clock: an honest one, and one knob per promise a
provider may break (the provider check must catch each, and pass the honest one)."""

from __future__ import annotations

import asyncio
import itertools
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pivotal import App, Catalogue, FakeClock, StepContext
from pivotal.declarations.catalogue import NothingToUndo
from pivotal.errors import Transient

LOOKUP_LAG = 0.5  # what the catalogue declares: its lookups may lag this long
DOUBT_GRACE = 2.0  # how long after a cut-off the catalogue takes a call to be able to land
LIMIT = Decimal("500")  # the sandbox declines a charge above it


class Charge(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"amount": "20"}]})

    amount: Decimal = Field(gt=0)


class Declined(Exception):
    """The provider's refusal: documented as no effect."""


class NotFound(Exception):
    pass


@dataclass
class Knobs:
    """How the provider behaves; the defaults are the honest provider."""

    replays: bool = True  # a key used again answers its first result
    replays_at_once: bool = True  # ... also while the first call is in flight
    lag: float = 0.0  # seconds before a lookup sees an effect
    lookup_finds: bool = True  # a lookup finds effects at all
    lookup_invents: bool = False  # a lookup finds something for any key
    lookup_raises: bool = False  # a lookup raises instead of answering
    forgets_after: float | None = None  # a key is forgotten this long after its first use
    undo_again_raises: bool = False  # a second undo with its key raises
    undo_unmade_raises: bool = False  # an undo of an effect never made raises NotFound
    lands_after: float = 0.0  # a cut-off call lands this long after it was cut off
    refusal_charges: bool = False  # a declined charge is charged all the same
    takes: float = 0.0  # seconds on the fake clock an answered call takes
    slow_keys: frozenset[int] = frozenset()  # calls of these key indexes never answer
    deaf: bool = False  # a slow call swallows its cancellation and waits on (a stuck SDK)


@dataclass
class Effect:
    key: str
    result: dict[str, Any]
    at: float  # when it landed
    refunded: bool = False


@dataclass
class Provider:
    clock: FakeClock
    knobs: Knobs = field(default_factory=Knobs)
    effects: list[Effect] = field(default_factory=list)
    calls: int = 0
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _in_flight: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    _pending: list[Effect] = field(default_factory=list)  # sent, not landed yet
    released: asyncio.Event = field(default_factory=asyncio.Event)  # ends every slow call

    def _land(self) -> None:
        now = self.clock.now()
        for effect in [e for e in self._pending if e.at <= now]:
            self._pending.remove(effect)
            self.effects.append(effect)

    def _known(self, key: str) -> Effect | None:
        self._land()
        for effect in self.effects:
            if effect.key != key:
                continue
            forgets = self.knobs.forgets_after
            if forgets is not None and self.clock.now() - effect.at > forgets:
                continue
            return effect
        return None

    def in_place(self) -> list[Effect]:
        """The effects that landed and were not refunded."""
        self._land()
        return [e for e in self.effects if not e.refunded]

    async def charge(self, args: Charge, ctx: StepContext) -> dict[str, Any]:
        self.calls += 1
        knobs = self.knobs
        if args.amount > LIMIT:
            if knobs.refusal_charges:
                self._made(ctx.key, args)
            raise Declined(f"amount {args.amount} over the sandbox's limit")
        if knobs.replays and (known := self._known(ctx.key)) is not None:
            return known.result
        if knobs.replays_at_once and ctx.key in self._in_flight:
            return await asyncio.shield(self._in_flight[ctx.key])
        made = asyncio.get_running_loop().create_future()
        self._in_flight[ctx.key] = made
        result = {"id": f"ch_{next(self._ids)}", "amount": str(args.amount)}
        # the request is on the wire: it lands even if the caller stops waiting now
        sent = Effect(ctx.key, result, math.inf)
        self._pending.append(sent)
        try:
            if ctx.index in knobs.slow_keys:
                await self.released.wait()  # until its client gives up on it
            await asyncio.sleep(0)
            self.clock.advance(knobs.takes)
        except asyncio.CancelledError:  # cut off by its client: it lands all the same
            sent.at = self.clock.now() + knobs.lands_after
            made.cancel()
            self._in_flight.pop(ctx.key, None)
            if not knobs.deaf:
                raise
            await self.released.wait()
            return result
        if sent in self._pending:  # the reply says it landed, now
            self._pending.remove(sent)
            sent.at = self.clock.now()
            self.effects.append(sent)
        made.set_result(result)
        self._in_flight.pop(ctx.key, None)
        return result

    def _made(self, key: str, args: Charge) -> None:
        result = {"id": f"ch_{next(self._ids)}", "amount": str(args.amount)}
        self.effects.append(Effect(key, result, self.clock.now()))

    async def find(self, args: Charge, ctx: StepContext) -> dict[str, Any] | None:
        self.calls += 1
        knobs = self.knobs
        if knobs.lookup_raises:
            raise RuntimeError("lookup: 502 from the sandbox")
        if knobs.lookup_invents:
            return {"id": "ch_phantom", "amount": str(args.amount)}
        if not knobs.lookup_finds:
            return None
        effect = self._known(ctx.key)
        if effect is None or self.clock.now() - effect.at < knobs.lag:
            return None
        return effect.result

    async def refund(self, args: Charge, result: Any, ctx: StepContext) -> str:
        self.calls += 1
        self._land()
        found = [e for e in self.effects if e.key == ctx.action_key]
        if not found:
            if self.knobs.undo_unmade_raises:
                raise NotFound(f"no charge made with {ctx.action_key}")
            return NothingToUndo("no charge made with that key")
        if all(e.refunded for e in found):
            if self.knobs.undo_again_raises:
                raise Transient("charge already refunded")
            return f"refunded {found[0].result['id']} already"
        for effect in found:
            effect.refunded = True
        return f"refunded {found[0].result['id']}"


def payments(
    provider: Provider,
    *,
    repeatable: bool = True,
    sandbox: bool = True,
    checked: str | None = None,
    timeout: float = 5.0,
) -> App:
    """An app whose catalogue ``payments`` charges through ``provider``: one compensable
    step, ``charge``, with its lookup and its refund."""
    catalogue = Catalogue(
        "payments", default_timeout=timeout, doubt_grace=DOUBT_GRACE, checked=checked
    )
    catalogue.compensable(
        undo=provider.refund,
        lookup=provider.find,
        lookup_lag=LOOKUP_LAG,
        repeatable=repeatable,
        no_effect_on=(Declined,),
        name="charge",
    )(provider.charge)
    return App([catalogue], name="payments", sandbox=sandbox)


SANDBOX: dict[str, Any] = {
    "steps": {
        "charge": {
            "args": {"amount": "20"},
            "refused": [{"args": {"amount": "900"}, "why": "over the limit"}],
        }
    }
}


def unmarked() -> App:
    """The payments app over an honest provider, not declared a sandbox (``--app``)."""
    return payments(Provider(FakeClock()), sandbox=False)
