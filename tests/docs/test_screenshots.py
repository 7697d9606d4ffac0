"""The README's screenshots are taken from the live pages by the browser test; here, without
a browser: every image the README embeds exists, and none is older than the templates and
the stylesheet of the page it shows (docs/screenshots.json records their hashes when the
images are refreshed)."""

from __future__ import annotations

import json
import re

import pytest
from screenshots_manifest import MANIFEST, PAGES, REFRESH, ROOT, SCREENSHOTS, sources_of

README = ROOT / "README.md"
IMAGE = re.compile(r"!\[[^\]]*\]\((docs/screenshots/[^)\s]+)\)")
PNG = b"\x89PNG\r\n\x1a\n"


def embedded() -> list[str]:
    return IMAGE.findall(README.read_text())


def test_the_readme_embeds_the_screenshots() -> None:
    assert sorted(p.removeprefix("docs/screenshots/") for p in embedded()) == sorted(PAGES)


@pytest.mark.parametrize("path", embedded())
def test_every_readme_image_exists(path: str) -> None:
    image = ROOT / path
    assert image.is_file(), f"{path} is missing: take it with {REFRESH}"
    assert image.read_bytes()[:8] == PNG, f"{path} is not a PNG: take it again with {REFRESH}"
    assert image.parent == SCREENSHOTS
    assert image.name in PAGES, f"{path}: say which page it shows in screenshots_manifest.PAGES"


@pytest.mark.parametrize("path", embedded())
def test_no_readme_image_is_older_than_the_page_it_shows(path: str) -> None:
    name = path.removeprefix("docs/screenshots/")
    recorded = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    assert name in recorded, f"{MANIFEST.name} does not list {name}: take it with {REFRESH}"
    now = sources_of(name)
    taken = recorded[name]["sources"]
    changed = sorted(p for p in now.keys() | taken.keys() if now.get(p) != taken.get(p))
    assert not changed, (
        f"{path} is older than {', '.join(changed)} (changed since it was taken): "
        f"look at the page, then take it again with {REFRESH}"
    )
