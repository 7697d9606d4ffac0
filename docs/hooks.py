"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks``).

* The generated reference pages (``docs/gen_reference.py``) join every build as files of
  their own, never written to ``docs_dir``: what the site shows is what the code holds.
* The screenshots under ``docs/screenshots/`` (where the browser tests write them) are
  served at ``screenshots/``; a page shows one as ``../screenshots/NAME.png``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "docs" / "screenshots"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", Path(__file__).with_name("gen_reference.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    return files
