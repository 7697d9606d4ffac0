"""The saga engine. ``machine`` decides (pure: no I/O, no clock, no asyncio); the parts of a
pass carry its decisions out against the ledger and the step's code: ``journal`` (the ledger
writes), ``calls`` (calls into a step's code), ``gates`` (what is asked before a unit runs),
``forward`` and ``backward`` (a step run to its outcome; compensation and dead letters),
``resuming`` (a parked saga resumed from a step, as the machine's rows allow) and ``driver``
(the one loop that carries the machine's decisions out, for every path)."""

from pivotal.engine.calls import Abandoned, Cancelled
from pivotal.engine.driver import Driver
from pivotal.engine.gates import gate_of
from pivotal.engine.journal import (
    AlreadyCreated,
    Creation,
    RunOptions,
    Suspended,
    point_of_no_return,
)
from pivotal.engine.values import describe, jsonable

__all__ = [
    "Abandoned",
    "Cancelled",
    "AlreadyCreated",
    "Creation",
    "RunOptions",
    "Driver",
    "Suspended",
    "describe",
    "gate_of",
    "jsonable",
    "point_of_no_return",
]
