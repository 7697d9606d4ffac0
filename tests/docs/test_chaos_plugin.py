"""The ``pivotal_chaos`` fixture in a project of one's own: the chaos test the manual shows
(docs/site/how-to/test-your-catalogue.md) runs with plain pytest settings, ``explore`` runs
from a plain test too, and an ``explore`` that is never run fails its test instead of
passing without having explored anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FIRST = ROOT / "examples" / "first_catalogue"


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``folder`` as a user's project: its own (empty) settings, not Pivotal's."""
    (folder / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIVOTAL_", "SHOP_"))}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=folder,
        env=env | {"COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    shutil.copytree(FIRST, folder, ignore=shutil.ignore_patterns("__pycache__", "*.db*"))
    return folder


@pytest.mark.timeout(600)
def test_the_manuals_chaos_test_passes_in_a_project_of_its_own(shop: Path) -> None:
    done = pytest_in(shop)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert "pivotal chaos summary" in done.stdout
    assert "0 with invariant failures" in done.stdout
    # the manual's scenarios: "paid", and "capture declined" (the issuer declines the capture)
    for row in ("in-process  capture declined", "in-process  paid", "sigkill     paid"):
        assert row in done.stdout


PLAIN = """
import asyncio

from test_shop_chaos import SCENARIOS, ShopWorld


def test_run_from_a_plain_test(pivotal_chaos):
    results = asyncio.run(pivotal_chaos.explore(ShopWorld, SCENARIOS[:1]))
    assert results and all(r.status.value == "completed" for r in results)


def test_never_run(pivotal_chaos):
    pivotal_chaos.explore(ShopWorld, SCENARIOS)
"""


@pytest.mark.timeout(600)
def test_explore_from_a_plain_test_and_an_exploration_never_run(shop: Path) -> None:
    (shop / "test_plain.py").write_text(PLAIN)

    done = pytest_in(shop, "test_plain.py", "-W", "error::RuntimeWarning")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 passed, 1 error" in done.stdout  # test_never_run: passed, then its teardown errs
    assert "ERROR test_plain.py::test_never_run" in done.stdout
    assert "pivotal_chaos.explore(...) was called but never run" in done.stdout
    assert "never awaited" not in done.stdout + done.stderr
