"""`pivotal demo --out DIR` only ever removes what it created itself."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pivotal import InvalidInput, SQLiteStore
from pivotal.examples.commerce.demo import MARKER, prepare_folder, run_demo

PIVOTAL = Path(sys.executable).parent / "pivotal"


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_a_new_folder_is_made_and_marked_as_the_demos(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    prepare_folder(folder)
    assert [p.name for p in folder.iterdir()] == [MARKER]
    assert "pivotal demo" in (folder / MARKER).read_text()


def test_an_empty_folder_is_taken(tmp_path: Path) -> None:
    prepare_folder(tmp_path)
    assert (tmp_path / MARKER).is_file()


def test_a_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "pivotal.db"
    mine.write_text("a saga of mine")
    with pytest.raises(InvalidInput, match="is a file"):
        prepare_folder(mine)
    assert mine.read_text() == "a saga of mine"


@pytest.mark.parametrize("name", ["pivotal.db", "commerce.db", "notes.txt", ".hidden"])
def test_a_folder_holding_anything_else_is_refused_untouched(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("mine")
    with pytest.raises(InvalidInput, match="did not create"):
        prepare_folder(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert (tmp_path / name).read_text() == "mine"


async def test_a_second_run_replaces_only_the_demos_own_files(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    await run_demo(folder, quiet())
    (folder / "notes.txt").write_text("kept")
    (folder / "mine.db").write_text("kept")

    results = await run_demo(folder, quiet())

    assert len(results) == 9
    assert (folder / "notes.txt").read_text() == "kept"
    assert (folder / "mine.db").read_text() == "kept"
    async with SQLiteStore(folder / "pivotal.db") as store:
        sagas = await store.list_sagas(None, 100)
    assert sorted(s.saga_id for s in sagas) == [f"demo-{n}" for n in range(1, 10)]  # fresh


def test_demo_out_dot_refuses_a_folder_with_a_users_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "pivotal.db"
    ledger.write_bytes(b"a user's saga")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    for out in (".", "pivotal.db"):
        done = subprocess.run(
            [str(PIVOTAL), "demo", "--out", out],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode != 0
        assert "error [invalid_input]" in done.stderr
        assert "Traceback" not in done.stderr
    assert ledger.read_bytes() == b"a user's saga"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pivotal.db"]
