"""Test your own catalogue the way Pivotal tests itself: crash it anywhere, check the world.

A *world* is your providers for one run (your app bound to them and an ``EffectProbe`` that
reads their state); a ``ChaosScenario`` is a plan and the faults it meets. ``explore`` runs
each scenario once per crash site it reaches and checks every invariant afterwards; the
``pivotal_chaos`` pytest fixture wraps it.

Beyond crashes: ``flaky_ledger`` makes chosen commits fail (before the write, after it, or
lost as a whole), and a ``Takeover`` lets a second process with the same owner name in
while a call is in flight, its lease expired or not. Every run records when each call
started and ended, so that no step is found called concurrently with itself.
"""

from pivotal.clock import FakeClock
from pivotal.hooks import Point
from pivotal.testing.chaos import (
    ChaosScenario,
    ForgetsKeys,
    LedgerFactory,
    Recovery,
    RunResult,
    World,
    memory_ledger,
    recover,
    recover_counting,
    run_in_process,
    trace,
    until_quiet,
)
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash, Trace
from pivotal.testing.inflight import CallLog, Interlude, Process, instrument, running_as
from pivotal.testing.invariants import Violation, check_invariants, concurrent_calls
from pivotal.testing.ledger import (
    CommitFault,
    FlakyLedger,
    FlakyStore,
    StoreFault,
    flaky_ledger,
)
from pivotal.testing.probe import CallProbe, CallSpan, EffectProbe
from pivotal.testing.realkill import run_killed
from pivotal.testing.report import Chaos, ChaosReport
from pivotal.testing.takeover import Takeover

__all__ = [
    "CallLog",
    "CallProbe",
    "CallSpan",
    "Chaos",
    "ChaosReport",
    "ChaosScenario",
    "CommitFault",
    "CrashAt",
    "CrashSite",
    "EffectProbe",
    "FakeClock",
    "FlakyLedger",
    "ForgetsKeys",
    "FlakyStore",
    "Interlude",
    "LedgerFactory",
    "Point",
    "Process",
    "Recovery",
    "RunResult",
    "SimulatedCrash",
    "StoreFault",
    "Takeover",
    "Trace",
    "Violation",
    "World",
    "check_invariants",
    "concurrent_calls",
    "flaky_ledger",
    "instrument",
    "memory_ledger",
    "recover",
    "recover_counting",
    "run_in_process",
    "run_killed",
    "running_as",
    "trace",
    "until_quiet",
]
