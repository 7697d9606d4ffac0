"""Test your own catalogue the way Pivotal tests itself: crash it anywhere, check the world.

A *world* is your providers for one run (your app bound to them and an ``EffectProbe`` that
reads their state); a ``ChaosScenario`` is a plan and the faults it meets. ``explore`` runs
each scenario once per crash site it reaches and checks every invariant afterwards; the
``pivotal_chaos`` pytest fixture wraps it.
"""

from pivotal.clock import FakeClock
from pivotal.hooks import Point
from pivotal.testing.chaos import (
    ChaosScenario,
    LedgerFactory,
    RunResult,
    World,
    memory_ledger,
    recover,
    run_in_process,
    trace,
    until_quiet,
)
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash, Trace
from pivotal.testing.invariants import Violation, check_invariants
from pivotal.testing.probe import EffectProbe
from pivotal.testing.realkill import run_killed
from pivotal.testing.report import Chaos, ChaosReport

__all__ = [
    "Chaos",
    "ChaosReport",
    "ChaosScenario",
    "CrashAt",
    "CrashSite",
    "EffectProbe",
    "FakeClock",
    "LedgerFactory",
    "Point",
    "RunResult",
    "SimulatedCrash",
    "Trace",
    "Violation",
    "World",
    "check_invariants",
    "memory_ledger",
    "recover",
    "run_in_process",
    "run_killed",
    "trace",
    "until_quiet",
]
