"""A ledger holds every saga, the token hashes and the outbox: a new SQLite ledger, its WAL
and its shared-memory file are readable by their owner only, whatever the umask, and so is
a folder made for it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pivotal import SQLiteStore


@pytest.fixture
def lax_umask() -> Iterator[None]:
    before = os.umask(0o000)  # the laxest there is: everything made world-writable
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_ledger_and_its_files_are_private(tmp_path: Path, lax_umask: None) -> None:
    path = tmp_path / "new" / "deeper" / "ledger.db"
    async with SQLiteStore(path) as store:
        await store.list_sagas()
        for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert f.exists(), f
            assert mode(f) == 0o600, (f, oct(mode(f)))
    assert mode(path.parent) == 0o700
    assert mode(path.parent.parent) == 0o700


async def test_an_existing_ledger_keeps_the_mode_its_owner_gave_it(
    tmp_path: Path, lax_umask: None
) -> None:
    path = tmp_path / "shared.db"
    async with SQLiteStore(path):
        pass
    path.chmod(0o640)  # its owner shares it with a group on purpose
    async with SQLiteStore(path):
        pass
    assert mode(path) == 0o640
