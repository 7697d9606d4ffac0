"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks``).

* The generated reference pages (``docs/gen_reference.py``) join every build as files of
  their own, never written to ``docs_dir``: what the site shows is what the code holds.
* The screenshots under ``docs/screenshots/`` are served at ``screenshots/``.
* The README is written to be read where it lives, and its sections are included into
  pages by ``pymdownx.snippets``; its links are made to work from the page a section lands
  on: a link to a heading of another section points at the page holding it, a link to a
  screenshot at the site's copy, and a link to a file or folder of the repository, which the
  site does not hold, keeps only its text.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.extensions.toc import slugify
from markdown.preprocessors import Preprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SCREENSHOTS = ROOT / "docs" / "screenshots"

INCLUDE = re.compile(r'^--8<-- "README\.md:([\w-]+)"\s*$', re.MULTILINE)
SECTION = re.compile(r"^<!-- --8<-- \[(start|end):([\w-]+)\] -->$")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")

# set as the build goes: which page is being rendered, and where each README heading lands
_state: dict[str, Any] = {"page": None, "anchors": {}, "files": None}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", Path(__file__).with_name("gen_reference.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def readme_sections() -> dict[str, list[str]]:
    """The README's lines by the snippet section they are in."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in README.read_text().splitlines():
        marker = SECTION.match(line)
        if marker:
            current = marker.group(2) if marker.group(1) == "start" else None
            sections.setdefault(marker.group(2), [])
        elif current is not None:
            sections[current].append(line)
    return sections


def headings(lines: list[str]) -> list[str]:
    """The anchors ``toc`` gives the Markdown headings of these lines."""
    found, fenced = [], False
    for line in lines:
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip()
            title = LINK.sub(r"\2", title).replace("`", "")
            found.append(slugify(title, "-"))
    return found


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for name, content in _generator().pages().items():
        files.append(File.generated(config, name, content=content))
    for shot in sorted(SCREENSHOTS.glob("*.png")):
        files.append(
            File(
                f"screenshots/{shot.name}",
                str(SCREENSHOTS.parent),
                config.site_dir,
                config.use_directory_urls,
            )
        )
    anchors: dict[str, str] = {}
    for page in files.documentation_pages():
        if page.generated_by is None:
            for section in INCLUDE.findall(page.content_string):
                for anchor in headings(readme_sections().get(section, [])):
                    anchors.setdefault(anchor, page.src_uri)
    _state["anchors"] = anchors
    _state["files"] = files
    return files


def on_page_markdown(markdown: str, page: Page, **kwargs: Any) -> str:
    _state["page"] = page.file.src_uri
    return markdown


def rewrite(line: str, page: str) -> str:
    """One line of a page with the README's links made to work from ``page``."""
    here = posixpath.dirname(page)
    files: Files = _state["files"]

    def relative(target: str) -> str:
        return posixpath.relpath(target, here or ".")

    def one(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if "://" in target or target.startswith(("mailto:", "/")):
            return match.group(0)
        if target.startswith("#"):
            home = _state["anchors"].get(target[1:])
            if home is None or home == page:
                return match.group(0)
            return f"{bang}[{label}]({relative(home)}{target})"
        path = target.split("#", 1)[0]
        if files.get_file_from_path(posixpath.normpath(posixpath.join(here, path))):
            return match.group(0)  # a page or a file of the site
        if path.startswith("docs/screenshots/"):
            return f"{bang}[{label}]({relative('screenshots/' + path.rsplit('/', 1)[1])})"
        if (ROOT / path).exists():
            return label  # a file of the repository: its name, without a link
        return match.group(0)  # left as it is: the build reports it

    return LINK.sub(one, line)


class _ReadmeLinks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        page = _state["page"]
        if page is None or _state["files"] is None:
            return lines
        out, fenced = [], False
        for line in lines:
            if FENCE.match(line):
                fenced = not fenced
            out.append(line if fenced else rewrite(line, page))
        return out


class ReadmeLinks(Extension):
    def extendMarkdown(self, md: Markdown) -> None:
        # after pymdownx.snippets (32) has included the README's sections
        md.preprocessors.register(_ReadmeLinks(md), "pivotal_readme_links", 31)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    config.markdown_extensions.append(ReadmeLinks())  # type: ignore[arg-type]
    return config
