"""The screenshots the site's pages show are taken from the live pages by the browser test;
here, without a browser: every image a page embeds is one of them and exists, and none is
older than the templates and the stylesheet of the page it shows (docs/screenshots.json
records their hashes when the images are refreshed).

The images live in docs/screenshots/ and the site serves them at screenshots/
(docs/hooks.py), so a page names one by its path from the page to there."""

from __future__ import annotations

import json
import posixpath
import re

import pytest
from screenshots_manifest import MANIFEST, REFRESH, SCREENSHOTS, sources_of
from screenshots_manifest import PAGES as SHOWN

from manual import PAGES, name, pages

IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
PNG = b"\x89PNG\r\n\x1a\n"


def embedded() -> list[tuple[str, str]]:
    """Each image a page embeds: the page (from the repository's root) and the image's path
    in the site."""
    found = []
    for path in pages():
        here = posixpath.dirname(path.relative_to(PAGES).as_posix())
        for target in IMAGE.findall(path.read_text()):
            found.append((name(path), posixpath.normpath(posixpath.join(here, target))))
    return found


def test_the_pages_embed_the_screenshots() -> None:
    shown = [image.removeprefix("screenshots/") for _, image in embedded()]
    assert sorted(shown) == sorted(SHOWN)


@pytest.mark.parametrize(("page", "image"), embedded())
def test_every_image_a_page_embeds_is_a_screenshot_that_exists(page: str, image: str) -> None:
    folder, _, file = image.rpartition("/")
    assert folder == "screenshots", f"{page}: {image} is not served at screenshots/"
    path = SCREENSHOTS / file
    assert path.is_file(), f"{page}: {path} is missing: take it with {REFRESH}"
    assert path.read_bytes()[:8] == PNG, f"{path} is not a PNG: take it again with {REFRESH}"
    assert file in SHOWN, f"{image}: say which page it shows in screenshots_manifest.PAGES"


@pytest.mark.parametrize(("page", "image"), embedded())
def test_no_image_is_older_than_the_page_it_shows(page: str, image: str) -> None:
    file = image.removeprefix("screenshots/")
    recorded = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    assert file in recorded, f"{MANIFEST.name} does not list {file}: take it with {REFRESH}"
    now = sources_of(file)
    taken = recorded[file]["sources"]
    changed = sorted(p for p in now.keys() | taken.keys() if now.get(p) != taken.get(p))
    assert not changed, (
        f"{page} shows {file}, which is older than {', '.join(changed)} (changed since it "
        f"was taken): look at the page, then take it again with {REFRESH}"
    )
