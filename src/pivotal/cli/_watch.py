"""``sagas show --watch`` where its output is no terminal (a pipe, a file, a log): each
change as a plain line, never a redrawn screen."""

from __future__ import annotations

from collections.abc import Mapping

from pivotal.sagas.progress import Shown, summary
from pivotal.sagas.state import SagaState


def lines(state: SagaState, progress: Mapping[int, Shown], waiting: str | None) -> dict[str, str]:
    """What the watch tells of the saga, a line per thing that may change, by what it is
    about: the saga's status, each step, and that no worker is alive to run it."""
    reason = f" ({state.reason})" if state.reason else ""
    found = {"status": f"{state.saga_id}: {state.status.value}{reason}"}
    for r in state.steps:
        undo = "" if r.undo_status.value == "none" else f", undo {r.undo_status.value}"
        shown = progress.get(r.index)
        call = "" if shown is None else f" · {summary(shown)}"
        line = f"step {r.index} {r.name}: {r.status.value}, try {r.attempts}{undo}{call}"
        found[f"step {r.index}"] = line
    found["no worker"] = waiting or ""
    return found


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The lines of ``after`` that say something new, in order (a notice that went away
    says so too)."""
    said = []
    for about, line in after.items():
        if before.get(about) == line:
            continue
        if line:
            said.append(line)
        elif about == "no worker":
            said.append("it no longer waits for a worker")
    return said
