"""A deterministic simulation of the real program: the engine's main test.

The real driver, orchestrator, workers (claims, leases, heartbeats, sweeps) and a person's
acts, on the real SQLite ledger, under virtual time, against simulated providers that meet
every fault the documents name; hosts go away, pause and have their clocks skewed. One seed
is one story, replayed exactly (``python -m pivotal.testing.sim --seed N``). What must hold
is checked against the providers' own books, never against what the ledger believes.
"""

from pivotal.testing.sim.run import Report, Settings, simulate

__all__ = ["Report", "Settings", "simulate"]
