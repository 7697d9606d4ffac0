"""The manual, as the tests read it: README.md and the written pages of the documentation
site (``docs/site/**/*.md``; the reference pages ``docs/gen_reference.py`` makes are not
written there). A test that checks what the manual says reads the one page that says it,
``page("how-to/serving.md")``, or the whole manual, ``manual()``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = ROOT / "docs" / "site"


def pages() -> list[Path]:
    """Every written page of the site, in a stable order."""
    return sorted(PAGES.rglob("*.md"))


def files() -> list[Path]:
    """The manual's files: the README, then every written page."""
    return [README, *pages()]


def page(path: str) -> str:
    """The text of one page, named by its path under ``docs/site/``."""
    found = PAGES / path
    assert found.is_file(), f"docs/site/{path} is not a page of the site"
    return found.read_text()


def manual() -> str:
    """The text of the whole manual, one file after the other."""
    return "\n".join(path.read_text() for path in files())


def name(path: Path) -> str:
    """A file of the manual as a reader finds it: its path from the repository's root."""
    return path.relative_to(ROOT).as_posix()
