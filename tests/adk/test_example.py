"""The runnable example prints both scenarios of the worked example, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_runs_offline() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples/adk_order_saga/main.py")],
        capture_output=True,
        text=True,
        timeout=50,
        env=env,
        check=True,
    ).stdout
    one, two = out.split("== 2.")
    assert "comp:charge = " in one
    assert "saga_status = compensated" in one
    assert "provider calls in order: reserve, charge, ship, refund, release" in one
    assert "email" not in one
    assert "decided:check=the check found the order invalid" in two
    assert "saga_status = compensated" in two
    assert "provider calls in order: reserve, release" in two
