"""What the browser tests share: Debian's Chromium through Playwright (the module is skipped
without them), ``pivotal serve``'s app under uvicorn in a thread over a SQLite ledger, the
login form, and the screenshots (docs/screenshots/, with their manifest).

The screenshots are meant to be the same on every run: a fixed viewport (the ``page``
fixture, tests/browser/conftest.py), a clock that stands still at ``NOW`` (so no "waited"
or "expires in" moves), the example services' ids made from a counter instead of random
(``fixed_ids``), animations and the caret off. ``PIVOTAL_UPDATE_SCREENSHOTS=1`` copies them
into docs/ and records, in docs/screenshots.json, the templates and stylesheet each was
taken from (tests/docs/test_screenshots.py fails once those change)."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import itertools
import os
import shutil
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pivotal import SQLiteStore
from pivotal.clock import Clock
from pivotal.declarations.app import App
from pivotal.declarations.catalogue import Catalogue
from pivotal.examples.commerce import services as commerce_services

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
NOW = 1_796_040_000.0  # 2026-11-30 12:00:00 UTC: every page shows the same times

if not CHROMIUM.exists():
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is required in CI (apt-get install chromium)", pytrace=False)
    pytest.skip("Chromium is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
T = TypeVar("T")


def in_thread(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on its own loop in another thread (Playwright's runs in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def fixed_id(prefix: str, n: int) -> str:
    """The example services' ids (``res_…``, ``au_…``), the same on every run."""
    return f"{prefix}_{hashlib.sha256(f'{prefix}-{n}'.encode()).hexdigest()[:12]}"


def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the example services' ids from a counter (``fixed_id``) for this test."""
    counter = itertools.count(1)
    monkeypatch.setattr(commerce_services, "_id", lambda prefix: fixed_id(prefix, next(counter)))


@contextmanager
def serving(ledger: Path, make_app: Callable[[], App | Catalogue], clock: Clock) -> Iterator[str]:
    """``pivotal serve``'s app (the API and the pages) over ``ledger`` and the app that
    ``make_app`` makes (called on the server's thread), under uvicorn in a thread of its
    own; its base URL while the block runs."""
    import uvicorn

    from pivotal.server import create_app as create_api

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue until uvicorn accepts: no need to wait for it
    port = sock.getsockname()[1]
    holder: dict[str, uvicorn.Server] = {}
    ready = threading.Event()

    async def serve() -> None:
        async with SQLiteStore(ledger) as store:
            api = create_api(store, make_app(), clock=clock)
            server = uvicorn.Server(uvicorn.Config(api, log_level="warning", lifespan="off"))
            holder["server"] = server
            ready.set()
            await server.serve(sockets=[sock])

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        holder["server"].should_exit = True
        thread.join(10)
        sock.close()


def login(
    page: sync_api.Page,
    url: str,
    token: str,
    *,
    start: str = "/ui/approvals",
    lands: str = "/ui/approvals",
) -> list[str]:
    """Open ``start``, be sent to the login form, log in with ``token`` and land on
    ``lands`` (an operator lands on /ui/needs-human). The dialogs the pages open from then
    on are dismissed and listed in the answer (there should be none)."""
    dialogs: list[str] = []

    def record(dialog: sync_api.Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    page.goto(f"{url}{start}")
    sync_api.expect(page).to_have_url(f"{url}/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    sync_api.expect(page).to_have_url(f"{url}{lands}")
    return dialogs


def manifest() -> Any:
    """tests/docs/screenshots_manifest.py: which page each image shows, and its sources."""
    spec = importlib.util.spec_from_file_location(
        "screenshots_manifest", ROOT / "tests" / "docs" / "screenshots_manifest.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shot(page: sync_api.Page, tmp_path: Path, name: str) -> None:
    """Keep a screenshot with the test's files; with PIVOTAL_UPDATE_SCREENSHOTS=1, also
    refresh the documents' copy and record what it was taken from in docs/screenshots.json."""
    assert name in manifest().PAGES, f"say which page {name} shows in screenshots_manifest.PAGES"
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
    if os.environ.get("PIVOTAL_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / name)
        manifest().write_manifest([name])
