"""Checking that a catalogue's providers keep the promises the engine relies on.

``check_provider(app, "checkout", sandbox=...)`` probes each step's action, lookup and undo
against the providers' sandboxes (one key, one effect; how far a lookup lags; how long a
key is remembered; undos that are idempotent and take "not found" for done; where a call
cut off by its client lands; whether a refusal taken for no effect made none) and reports
a row per promise, with the catalogue setting it implies. ``pivotal check-provider`` runs
it from the command line; ``Findings`` is what it records for ``Catalogue(checked=...)``.
"""

from pivotal.provider_check.check import (
    NotASandbox,
    SandboxFile,
    SandboxRefusal,
    SandboxStep,
    check_provider,
)
from pivotal.provider_check.model import (
    CheckReport,
    Findings,
    Promise,
    Row,
    StepFindings,
    StepReport,
    Verdict,
    drift,
    reuse_span,
)
from pivotal.provider_check.probes import Options

__all__ = [
    "CheckReport",
    "Findings",
    "NotASandbox",
    "Options",
    "Promise",
    "Row",
    "SandboxFile",
    "SandboxRefusal",
    "SandboxStep",
    "StepFindings",
    "StepReport",
    "Verdict",
    "check_provider",
    "drift",
    "reuse_span",
]
