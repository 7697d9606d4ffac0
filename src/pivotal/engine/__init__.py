"""The saga engine. ``machine`` decides (pure: no I/O, no clock, no asyncio); the parts of a
pass carry its decisions out against the ledger and the step's code: ``journal`` (the ledger
writes), ``calls`` (calls into a step's code), ``gates`` (what is asked before a unit runs),
``forward`` and ``backward`` (a step run to its outcome; compensation and dead letters), and
``driver`` (the one loop that carries the machine's decisions out, for every path)."""

from pivotal.engine.driver import (
    Abandoned,
    AlreadyCreated,
    Creation,
    Driver,
    RunOptions,
    Suspended,
    describe,
    gate_of,
    jsonable,
    point_of_no_return,
)

__all__ = [
    "Abandoned",
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
