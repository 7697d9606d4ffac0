"""The providers behind the simulated catalogue's steps: how each behaves.

Each step is a provider with the behaviours the documents and ``check-provider`` name: it
applies a key once (or, declared ``repeatable=False``, every call makes an effect), its
lookup is exact, lags within what it declares, raises now and then, or is missing; a long
call reports its progress. What each call meets (``Fault``) is drawn from the run's seed by
``pivotal.testing.sim.world``, which keeps the providers' books and builds the catalogue.
Every provider keeps its promises: a call lands no later than ``GRACE`` after its client
gave up on it, and a lookup sees an effect no later than its declared lag after it landed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from pivotal.declarations.identity import MONEY, Identity

TIMEOUT = 10.0  # every call's bound
GRACE = 5.0  # how long after its client gave up a call may still land
LAG = 3.0  # what the lagging lookups declare (each lags up to this)
APPROVAL_ABOVE = 300  # a capture above this waits for a person
APPROVAL_FOR = 120.0  # seconds an approval request stays open


class Fault(Enum):
    """What one call meets."""

    NONE = "none"
    REFUSED = "refused"  # Permanent: no effect
    ABORT = "abort"  # the call gives up (a verdict): no effect
    TRANSIENT = "transient"  # raised before anything was done
    LOST_REPLY = "lost_reply"  # the effect was made; the client's own timeout fired
    LANDS_LATER = "lands_later"  # raised at once; the request lands later
    UNDECLARED = "undeclared"  # raised something undeclared, before any effect
    UNDECLARED_AFTER = "undeclared_after"  # raised something undeclared, after the effect
    HANGS = "hangs"  # never answers: cut off by its bound; lands later or never


@dataclass(frozen=True)
class Provider:
    """How the provider behind one step behaves."""

    kind: str  # compensable, pivot or retriable
    replays: bool = True  # a repeated key answers as the first call did, making nothing
    lookup: str = "exact"  # exact, lagging (within LAG), flaky (raises now and then), none
    moves: bool = False  # it takes money: its value is reserved while it may be owed
    settles_first: bool = False  # repeated once with its key before an undo of it in doubt
    reports: bool = False  # a long call that reports its progress


PROVIDERS = {
    "hold": Provider("compensable", lookup="flaky", reports=True),
    "charge": Provider("compensable", replays=False, lookup="lagging", moves=True),
    "notify": Provider("compensable", lookup="none"),
    "reserve": Provider("compensable", lookup="flaky", settles_first=True),
    "book": Provider("compensable", lookup="none", settles_first=True),
    "capture": Provider("pivot", moves=True),
    "ship": Provider("retriable"),
    "email": Provider("retriable", lookup="none"),
}
COMPENSABLE = tuple(name for name, p in PROVIDERS.items() if p.kind == "compensable")
RETRIABLE = tuple(name for name, p in PROVIDERS.items() if p.kind == "retriable")

Account = Annotated[str, Field(pattern=r"^a-[0-9]{1,4}$"), Identity("account")]
Amount = Annotated[Decimal, MONEY, Field(gt=0, le=1000, decimal_places=2)]


class Call(BaseModel):
    """Every step's arguments: the account it is for, and an amount."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    account: Account
    amount: Amount = Decimal("10")
