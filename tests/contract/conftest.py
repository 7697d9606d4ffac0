"""The ledger contract runs on SQLite twice, once with each of its writers (the native one,
built by ``make``, and the pure-Python fallback), and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pivotal import SQLiteStore
from pivotal.store import Store, native
from pivotal.store.postgres import PostgresStore


@pytest.fixture(params=["sqlite", "sqlite-python", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Store]:
    ledger: SQLiteStore | PostgresStore
    if request.param == "postgres":
        ledger = PostgresStore(request.getfixturevalue("postgres_url"))
    else:
        if request.param == "sqlite-python":
            monkeypatch.setenv(native.WRITER_ENV, "python")
        ledger = SQLiteStore(tmp_path / "ledger.db")
    await ledger.open()
    assert not isinstance(ledger, SQLiteStore) or ledger.writer.native == (
        request.param == "sqlite" and native.installed()
    )
    yield ledger
    await ledger.close()
