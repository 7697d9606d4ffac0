"""What each screenshot of the documentation site shows, and the manifest that says which
sources it was taken from: ``docs/screenshots.json`` records, per image, the SHA-256 of each
template (the page's own, and every template it extends or includes, followed recursively)
and of style.css.

The browser tests (tests/browser/) write the manifest when they refresh the
images (``PIVOTAL_UPDATE_SCREENSHOTS=1``); tests/docs/test_screenshots.py recomputes the
hashes and fails, naming the image, when a source changed since it was taken."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
MANIFEST = ROOT / "docs" / "screenshots.json"
SERVER = ROOT / "src" / "pivotal" / "server"
TEMPLATES = SERVER / "templates"
STYLE = SERVER / "static" / "style.css"
REFRESH = "PIVOTAL_UPDATE_SCREENSHOTS=1 .venv/bin/pytest tests/browser"

# each image in docs/screenshots/, and the template of the page it shows
PAGES = {
    "approval-queue.png": "queue.html",
    "approval-detail.png": "detail.html",
    "sagas-search.png": "sagas.html",
    "saga-failure.png": "saga.html",
    "saga-live.png": "saga.html",
    "workers.png": "workers.html",
}
USES = re.compile(r"""{%-?\s*(?:extends|include|import|from)\s+["']([^"']+)["']""")


def templates_of(page: str) -> list[str]:
    """``page`` and every template it extends, includes or imports, recursively."""
    found: list[str] = []
    todo = [page]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.append(name)
        todo += USES.findall((TEMPLATES / name).read_text())
    return sorted(found)


def sources_of(image: str) -> dict[str, str]:
    """Each source file of ``image`` (its path from the repository's root) and its hash."""
    paths = [TEMPLATES / name for name in templates_of(PAGES[image])] + [STYLE]
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def write_manifest(images: list[str]) -> None:
    """Record the sources of ``images`` (just refreshed), keeping the other entries."""
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    for image in images:
        manifest[image] = {"page": PAGES[image], "sources": sources_of(image)}
    MANIFEST.write_text(json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")
