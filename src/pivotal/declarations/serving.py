"""What a process can serve: whether its catalogue can run a saga planned against another
build of it (a rolling deploy), and a digest of the catalogue for display.

A saga records the catalogue it was planned against: its name, the steps it uses as
(name, kind) in its ``saga_submitted`` event, and ``catalogue_digest``. A process whose
catalogue lacks one of those steps, or gives one another kind, cannot run the saga:
``unserved`` says why, and the one who claimed it gives it back without counting a pass
(see ``Orchestrator.drive``), for a process of the newer build to run.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any

from pivotal.declarations.catalogue import KIND_TEXT, Catalogue
from pivotal.sagas.state import SagaState

DIGEST_LENGTH = 16  # hex characters shown and kept: enough to tell builds apart by eye

# catalogue -> (what its digest was computed from, the digest); recomputed when a step is
# added to it after its first use
_digests: weakref.WeakKeyDictionary[Catalogue, tuple[tuple[Any, ...], str]] = (
    weakref.WeakKeyDictionary()
)


def _schema(model: type[Any]) -> Any:
    try:
        return model.model_json_schema()
    except Exception:  # a model pydantic cannot describe: its name stands for it
        return f"{model.__module__}.{model.__qualname__}"


def catalogue_digest(catalogue: Catalogue) -> str:
    """A stable hash of the catalogue's steps: their names, kinds and argument JSON
    schemas (not their code, retry policies or descriptions), the same in every process
    that declares the same steps. For display: two builds that differ in what a plan may
    say of a step have different digests."""
    steps = tuple((s.name, KIND_TEXT[s.kind], s.args_model) for s in catalogue)
    cached = _digests.get(catalogue)
    if cached is not None and cached[0] == steps:
        return cached[1]
    body = json.dumps(
        sorted([n, k, _schema(m)] for n, k, m in steps),
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    digest = hashlib.sha256(body.encode()).hexdigest()[:DIGEST_LENGTH]
    _digests[catalogue] = (steps, digest)
    return digest


def unserved(catalogue: Catalogue | None, state: SagaState) -> str | None:
    """Why ``catalogue`` (None: the process has no catalogue of the saga's name) cannot
    run the saga, or None when it can: every step the saga uses is in it, of the kind the
    saga was planned with. The one place this is decided."""
    if catalogue is None:
        return f"it serves no catalogue {state.catalogue!r}"
    for record in state.steps:
        step = catalogue.get(record.name)
        if step is None:
            return (
                f"step {record.name!r} is not in its catalogue {catalogue.name!r} "
                f"(digest {catalogue_digest(catalogue)})"
            )
        if step.kind.value != record.kind:
            return (
                f"step {record.name!r} is {step.kind.value} in its catalogue "
                f"{catalogue.name!r} (digest {catalogue_digest(catalogue)}), but the saga "
                f"was planned with it {record.kind}"
            )
    return None
