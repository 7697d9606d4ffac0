"""The saga engine: ``machine`` decides (pure: no I/O, no clock, no asyncio), ``run`` carries
its decisions out against the ledger and the step's code."""

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
