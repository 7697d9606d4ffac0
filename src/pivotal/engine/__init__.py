"""The saga engine. ``machine`` decides (pure: no I/O, no clock, no asyncio); the parts of a
pass carry its decisions out against the ledger and the step's code: ``journal`` (the ledger
writes), ``calls`` (calls into a step's code), ``gates`` (what is asked before a unit runs),
``forward`` and ``backward`` (a step run to its outcome; compensation and dead letters), and
``run`` (the loop that drives them)."""

from pivotal.engine.run import (
    Abandoned,
    AlreadyCreated,
    Creation,
    RunOptions,
    SagaRun,
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
    "SagaRun",
    "Suspended",
    "describe",
    "gate_of",
    "jsonable",
    "point_of_no_return",
]
