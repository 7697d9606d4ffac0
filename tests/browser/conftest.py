"""The browser tests' page: Debian's Chromium through Playwright, headless, in a fixed
viewport (the screenshots are the same on every run). tests/browser/browser_kit.py has the
rest they share; a test module importing it is skipped without Chromium or Playwright."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def page() -> Iterator[Any]:
    from browser_kit import CHROMIUM, sync_api

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        yield context.new_page()
        context.close()
        browser.close()
