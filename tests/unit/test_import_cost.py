"""``import pivotal`` loads no HTTP client, no web framework and no database driver: the
model planner and ``PostgresStore`` are imported when first used; ``pivotal.client`` loads
httpx and no web framework. Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("httpx", "httpcore", "psycopg", "psycopg_pool", "fastapi", "starlette", "uvicorn")


def loaded_after(code: str) -> set[str]:
    """Which of ``HEAVY`` a fresh interpreter has loaded after running ``code``."""
    report = f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    probe = f"{code}\nimport json, sys\n{report}"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import pivotal",
        "from pivotal import Orchestrator, SQLiteStore, parse_plan",
        "import pivotal.planning",
        "from pivotal.planning import planner_from_spec; planner_from_spec('rules')",
    ],
)
def test_importing_pivotal_loads_no_http_client_or_database_driver(code: str) -> None:
    assert loaded_after(code) == set()


def test_the_model_planner_brings_its_http_client_when_asked_for() -> None:
    loaded = loaded_after(
        "from pivotal.planning import planner_from_spec\n"
        "planner_from_spec('openai:m', {'PIVOTAL_OPENAI_BASE_URL': 'http://127.0.0.1:9/v1'})"
    )
    assert "httpx" in loaded
    assert "psycopg" not in loaded


@pytest.mark.parametrize("code", ["from pivotal import PostgresStore", "from pivotal import *"])
def test_the_postgres_store_brings_its_driver_when_asked_for(code: str) -> None:
    loaded = loaded_after(code)
    assert {"psycopg", "psycopg_pool"} <= loaded
    assert "httpx" not in loaded


@pytest.mark.parametrize(
    "code",
    [
        "from pivotal.client import Client, AsyncClient",
        "from pivotal.server import views, api_errors",
    ],
)
def test_the_http_client_and_the_answers_shapes_load_no_web_framework(code: str) -> None:
    assert loaded_after(code) <= {"httpx", "httpcore"}
