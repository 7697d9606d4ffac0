"""`pivotal dev` that stops at an error before its ledger is made (a port another process
holds) leaves nothing behind: no ledger, no folder for one; one that only checks makes no
ledger (the bundled example's own services keep their file beside it)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

PIVOTAL = str(Path(sys.executable).parent / "pivotal")


def test_a_busy_port_leaves_no_ledger_and_no_folder(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [PIVOTAL, "--example-app", "dev", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode != 0
    assert "error [port_in_use]" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_check_makes_no_ledger(tmp_path: Path) -> None:
    done = subprocess.run(
        [PIVOTAL, "--example-app", "dev", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".pivotal-dev" / "pivotal.db").exists()
