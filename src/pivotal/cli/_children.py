"""``pivotal`` commands run as child processes of another (``dev``'s server and worker, the
processes of ``worker --processes N``), each asked to stop when its parent dies, however it
dies. Private to ``pivotal.cli``."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from typing import Any

# A child runs the `pivotal` console script's code; like it, it does not import from the
# working folder unless PYTHONPATH says so. First it arranges to stop when its parent dies.
CHILD = (
    "import sys; sys.path.pop(0); sys.argv[0] = 'pivotal'; "
    "from pivotal.cli._children import follow_parent; follow_parent(); "
    "from pivotal.cli import main; main()"
)
PARENT = "PIVOTAL_PARENT"  # the pid of the process a child belongs to
_PR_SET_PDEATHSIG = 1


def pivotal_child(
    args: list[str], *, env: dict[str, str] | None = None, **options: Any
) -> subprocess.Popen[bytes]:
    """``pivotal ARGS`` as a child of this process (``env``: added to this one's)."""
    full = os.environ | (env or {}) | {PARENT: str(os.getpid())}
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], env=full, **options)


def follow_parent() -> None:
    """In a child: be asked to stop (SIGTERM, as a parent's own stop asks) when the parent
    dies, a ``kill -9`` included, so that no server or worker outlives it. Linux's
    parent-death signal does it; a child whose parent died before the signal was set exits
    at once. Elsewhere the children stop only when their parent stops them."""
    parent = os.environ.pop(PARENT, None)
    if parent is None or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):  # the parent is gone already: the signal never comes
        raise SystemExit(f"the parent process (pid {parent}) is gone")
