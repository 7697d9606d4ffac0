"""The manual runs as written: the README and every written page of the documentation site
(``tests/manual.py`` says which files those are).

Every fenced block the manual marks ``<!-- file: PATH -->`` is that file of the repository,
byte for byte; every other ``python`` block is run, from a copy of
``examples/first_catalogue`` and with top-level ``await`` (as ``python -m asyncio`` runs
code), and is pasted, line by line, into ``python -m asyncio`` itself (where a block ends
only at a blank line); a block marked ``<!-- output: SCRIPT -->`` is what the script prints
(but for its saga ids, new on every run); each ``sh`` block marked ``<!-- run: DIR -->`` is
run, command by command as written, with the installed ``pivotal`` first on ``PATH``, in a
copy of ``DIR``.
Every ``--app`` the manual gives for the first catalogue loads, each walk-through first says
how to get the ``pivotal`` command, and the chaos table's abbreviations are explained.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import pivotal
from manual import ROOT, files, manual, name, page
from pivotal.examples.commerce import create_app
from pivotal.planning.shadow import read_requests
from pivotal.testing.report import LEGEND

FIRST = ROOT / "examples" / "first_catalogue"
BIN = Path(sys.executable).parent
MARKER = re.compile(r"^<!-- (file|run|output): (\S+) -->\s*$")

RUN_SNIPPET = """
import ast, asyncio, inspect, sys
sys.path.insert(0, ".")
source = open(sys.argv[1]).read()
code = compile(source, sys.argv[2], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if inspect.iscoroutine(result):
    asyncio.run(result)
"""


@dataclass(frozen=True)
class Block:
    file: str  # the manual's file it is in, from the repository's root
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    marker: tuple[str, str] | None  # ("file", path) or ("run", folder)
    heading: int  # 1-based line of the heading it comes under (0: none)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    marker: tuple[str, str] | None = None
    heading = 0
    for token in MarkdownIt().parse(path.read_text()):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "heading_open":
            heading = line
        elif token.type == "html_block":
            match = MARKER.match(token.content.strip())
            marker = (match.group(1), match.group(2)) if match else marker
        elif token.type == "fence":
            lang = token.info.split()[0] if token.info.strip() else ""
            found.append(Block(name(path), lang, token.content, line, marker, heading))
            marker = None
    return found


BLOCKS = [block for path in files() for block in blocks(path)]
FILES = [b for b in BLOCKS if b.marker and b.marker[0] == "file"]
SNIPPETS = [b for b in BLOCKS if b.lang == "python" and b.marker is None]
WALKTHROUGHS = [b for b in BLOCKS if b.marker and b.marker[0] == "run"]
OUTPUTS = [b for b in BLOCKS if b.marker and b.marker[0] == "output"]
# what differs between two runs of an example: its saga ids (digests of random ids)
VARYING = re.compile(r"adk-[0-9a-f]{24}")


@functools.cache
def commands_folder() -> Path:
    """A folder holding a ``pivotal`` command that runs the package these tests import (a
    source tree on the tests' PYTHONPATH, say) whatever PYTHONPATH the manual sets."""
    folder = Path(tempfile.mkdtemp(prefix="pivotal-command-"))
    source = Path(pivotal.__file__).resolve().parents[1]
    script = folder / "pivotal"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(1, {str(source)!r})\n"
        "from pivotal.cli import main\nmain()\n"
    )
    script.chmod(0o755)
    return folder


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIVOTAL_", "SHOP_"))}
    clean.pop("PYTHONPATH", None)
    path = os.pathsep.join([str(commands_folder()), str(BIN), clean.get("PATH", "")])
    return clean | {"PATH": path, "COLUMNS": "200"}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A copy of examples/first_catalogue, as a reader would have it."""
    folder = tmp_path / "shop"
    shutil.copytree(FIRST, folder, ignore=shutil.ignore_patterns("__pycache__", "*.db*"))
    return folder


FENCE = re.compile(r"^\s*(```|~~~)")


@pytest.mark.parametrize("path", files(), ids=name)
def test_every_fenced_block_of_the_manual_is_collected(path: Path) -> None:
    """Counted another way, line by line: a block the parser missed would go unchecked."""
    opened, fenced = 0, False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            opened += not fenced
            fenced = not fenced
    assert not fenced, f"{name(path)} leaves a fence open"
    assert opened == len([b for b in BLOCKS if b.file == name(path)])


def test_every_python_block_is_a_file_of_the_repository_or_is_run() -> None:
    python = [b for b in BLOCKS if b.lang == "python"]
    assert python
    assert all(b in FILES or b in SNIPPETS for b in python)
    assert len(SNIPPETS) >= 2
    assert {b.marker[1] for b in FILES if b.marker} >= {
        "examples/first_catalogue/shop.py",
        "examples/first_catalogue/fakeshop.py",
        "examples/first_catalogue/order-4471.json",
        "examples/first_catalogue/test_shop_chaos.py",
        "examples/shadow/requests.jsonl",
    }


@pytest.mark.parametrize(
    "block", FILES, ids=[f"{b.where} {b.marker[1]}" for b in FILES if b.marker]
)
def test_a_file_shown_is_the_file_in_the_repository(block: Block) -> None:
    assert block.marker is not None
    path = ROOT / block.marker[1]
    assert path.is_file(), f"{block.where} shows {path}, which does not exist"
    assert block.text == path.read_text(), f"{block.where} differs from {block.marker[1]}"
    if block.lang == "python":  # it says where it lives
        assert block.text.startswith(f"# {block.marker[1]}\n")


@pytest.mark.parametrize("block", SNIPPETS, ids=[b.where for b in SNIPPETS])
def test_a_python_snippet_runs_as_written(block: Block, shop: Path) -> None:
    (shop / "snippet.py").write_text(block.text)
    done = subprocess.run(
        [sys.executable, "-c", RUN_SNIPPET, "snippet.py", block.where],
        cwd=shop,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr}"


PASTED = "@@ pasted to the end"


@pytest.mark.parametrize("block", SNIPPETS, ids=[b.where for b in SNIPPETS])
def test_a_python_snippet_runs_when_pasted_into_python_m_asyncio(block: Block, shop: Path) -> None:
    """The manual invites pasting each snippet into ``python -m asyncio``: its console reads
    a compound statement until a blank line, so a line after an indented block with no
    blank line between is a SyntaxError there, though the file would compile."""
    pasted = f"{block.text}\n\nprint({PASTED!r})\n"
    done = subprocess.run(
        [sys.executable, "-m", "asyncio"],
        input=pasted,
        cwd=shop,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    failed = "Traceback" in done.stderr or 'File "<console>"' in done.stderr
    assert not failed, f"{block.where}, pasted into python -m asyncio:\n{done.stderr}"
    assert PASTED in done.stdout, f"{block.where}:\n{done.stdout}\n{done.stderr}"


def test_there_is_a_walkthrough_to_run() -> None:
    assert WALKTHROUGHS


@pytest.mark.parametrize("block", WALKTHROUGHS, ids=lambda b: b.where)
def test_a_walkthrough_first_says_how_to_get_the_pivotal_command(block: Block) -> None:
    """Between the heading it comes under and the commands themselves."""
    text = (ROOT / block.file).read_text().splitlines()
    before = "\n".join(text[max(block.heading - 1, 0) : block.line - 1])
    assert "`. .venv/bin/activate`" in before, block.where
    assert "pip install -e /path/to/pivotal" in before, block.where


APP_SPEC = re.compile(r'--app(?:\s+|", ")([\w.]+:\w+)')
PLACEHOLDERS = {"module:attribute", "mypkg.app:app"}


def test_every_app_the_manual_names_for_the_first_catalogue_loads(shop: Path) -> None:
    named = set(APP_SPEC.findall(manual()))
    assert "shop:app" not in named  # the example module has create_app, not app
    ours = named - PLACEHOLDERS
    assert ours == {"shop:create_app"}, ours
    load = "import sys; from pivotal import load_app; load_app(sys.argv[1])"
    for spec in ours:
        done = subprocess.run(
            [sys.executable, "-c", load, spec],
            cwd=shop,
            env=env() | {"PYTHONPATH": "."},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"--app {spec}: {done.stderr}"


def test_serve_and_mcp_are_among_the_commands_that_need_an_app() -> None:
    text = page("how-to/command-line.md")
    start = text.index("**Which app.**")
    which = " ".join(text[start : text.index("\n\n", start)].split())
    listed = which[which.index("Every command that writes") :]
    for command in ("`serve`", "`mcp`", "`submit`", "`worker`", "`plan --submit/--run`"):
        assert command in listed, command


def test_the_chaos_table_abbreviations_are_explained() -> None:
    text = page("how-to/test-your-catalogue.md")
    for short, meaning in LEGEND.items():
        assert f"| `{short}` | {meaning} |" in text, short


def commands(block: Block) -> Iterator[str]:
    for line in block.text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            yield line


@pytest.mark.parametrize("block", WALKTHROUGHS, ids=lambda b: b.where)
def test_the_first_catalogue_walkthrough_runs_command_by_command(block: Block, shop: Path) -> None:
    assert block.marker == ("run", "examples/first_catalogue")
    script = list(commands(block))
    assert any("--app shop:create_app" in c for c in script)
    assert any("export PYTHONPATH=." in c for c in script)
    # The commands exactly as written, one after the other in one shell; a line printed
    # before each tells their outputs apart.
    marked = "\n".join(f"echo '@@@ {n}'\n{command}" for n, command in enumerate(script))
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", marked],
        cwd=shop,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    outputs = re.split(r"^@@@ \d+\n", done.stdout, flags=re.M)[1:]
    assert len(outputs) == len(script)
    said = dict(zip(script, outputs, strict=True))
    assert "valid" in said[next(c for c in script if " validate " in c)]
    assert "order-4471" in said[next(c for c in script if " submit " in c)]
    assert "awaiting_approval" in said[next(c for c in script if " worker " in c)]
    assert "completed" in said[next(c for c in script if " approve " in c)]
    shown = subprocess.run(
        [str(commands_folder() / "pivotal"), "sagas", "show", "order-4471", "--json"],
        cwd=shop,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    saga = json.loads(shown.stdout)
    assert saga["status"] == "completed", done.stdout
    assert [s["status"] for s in saga["steps"]] == ["succeeded"] * 3
    with closing(sqlite3.connect(shop / "shop.db")) as db:
        assert db.execute("SELECT key, status FROM holds").fetchall() == [
            ("order-4471:0", "captured")
        ]
        assert db.execute("SELECT key FROM captures").fetchall() == [("order-4471:1",)]
        assert db.execute("SELECT key FROM emails").fetchall() == [("order-4471:2",)]


def test_the_shadow_request_lines_shown_are_read_as_documented() -> None:
    app = create_app(":memory:")
    try:
        requests = read_requests(ROOT / "examples" / "shadow" / "requests.jsonl", app)
    finally:
        app.services.close()
    assert [r.catalogue for r in requests] == ["fulfilment", "checkout"]
    assert requests[0].request_id == "email-4471"
    assert requests[0].source_document_id == "mailbox/4471.eml"
    assert requests[1].context["quantity"] == 2
    text = page("how-to/agents.md")
    for field in ("text", "context", "catalogue", "request_id", "source_document_id"):
        assert f"| `{field}` |" in text


def test_the_testing_extra_brings_what_the_chaos_fixture_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    testing = project["optional-dependencies"]["testing"]
    names = {re.split(r"[<>=\[ ]", requirement)[0] for requirement in testing}
    assert names == {"pytest", "pytest-asyncio", "hypothesis"}
    assert 'pip install "pivotal[testing]"' in page("how-to/test-your-catalogue.md")
    assert project["entry-points"]["pytest11"]["pivotal"] == "pivotal.testing.plugin"


@pytest.mark.parametrize("block", OUTPUTS, ids=lambda b: b.where)
def test_an_output_shown_is_what_the_script_prints(block: Block) -> None:
    assert block.marker is not None
    script = ROOT / block.marker[1]
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in env().items() if not k.startswith(("GOOGLE_", "GEMINI_"))},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert VARYING.sub("adk-…", done.stdout) == VARYING.sub("adk-…", block.text), block.where


def test_the_adk_example_output_is_checked() -> None:
    assert [b.marker for b in OUTPUTS] == [("output", "examples/adk_order_saga/main.py")]
