"""The documentation site (``mkdocs.yml``, ``docs/site/``, ``docs/gen_reference.py``).

Its generated reference pages hold every error code, metric, event type, command and HTTP
operation, each set computed here another way than the generator does; its written pages own
their text (the README includes none of it and they include nothing of the README; their
code blocks are run by tests/docs/test_manual.py), each has its own title and a place in the
navigation; the README stays one screen that starts with the two commands; and the built
site refers to no host on the network.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client import generate_latest
from typer.testing import CliRunner

from manual import PAGES, README, ROOT, pages
from pivotal.cli import cli
from pivotal.declarations.plan_errors import ErrorCode
from pivotal.observability.metrics import PivotalMetrics
from pivotal.sagas.state import EventType

DOCS = ROOT / "docs"
SOURCE = Path(__import__("pivotal").__file__).parent

pytest.importorskip("mkdocs", reason="the documentation site needs the dev extra")


@cache
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def generated() -> dict[str, str]:
    """The generated reference pages, by their path in the site."""
    made: dict[str, str] = generator().pages()
    return made


def first_column(markdown: str) -> list[str]:
    """The first cell, unquoted, of every row of the page's tables."""
    return re.findall(r"^\| `([^`]+)` \|", markdown, re.MULTILINE)


def test_every_error_code_in_the_code_is_in_the_table_once() -> None:
    declared = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    target = getattr(statement, "targets", [getattr(statement, "target", None)])
                    value = getattr(statement, "value", None)
                    if (
                        [getattr(t, "id", None) for t in target] == ["code"]
                        and isinstance(value, ast.Constant)
                        and isinstance(value.value, str)
                    ):
                        declared.add(value.value)
    errors, validation = generated()[generator().ERRORS].split("## Plan validation codes")
    listed = first_column(errors)
    assert len(listed) == len(set(listed))
    assert set(listed) == declared
    assert first_column(validation) == [c.value for c in ErrorCode]


def test_every_error_code_has_the_status_the_api_answers_it_with() -> None:
    from pivotal.server.errors import STATUS

    errors = generated()[generator().ERRORS].split("## Plan validation codes")[0]
    shown = dict(re.findall(r"^\| `(\w+)` \| `[\w.]+` \| [^|]* \| (\d{3}) \|", errors, re.M))
    assert set(shown) == set(first_column(errors))  # every row has one
    for known, status in STATUS:
        assert shown[known.code] == str(status), known


def test_every_row_of_the_saga_machine_is_on_its_page_once() -> None:
    from pivotal.engine.machine import TABLE, Phase

    text = generated()[generator().MACHINE]
    sections = re.split(r"^### `(\w+)`$", text.split("## The table")[1], flags=re.M)[1:]
    by_phase = dict(zip(sections[::2], sections[1::2], strict=True))
    assert set(by_phase) == {row.phase.value for row in TABLE}
    for phase, body in by_phase.items():
        shown = re.findall(r"^\| `(\w+)` \| (.+?) \| `(\w+)` \| ", body, re.M)
        expected = [
            (row.seen.value, ", ".join(f"`{c}`" for c in row.when) or "always", row.do.value)
            for row in TABLE
            if row.phase is Phase(phase)
        ]
        assert shown == expected, phase


def test_every_row_of_admission_is_on_its_page_once_in_order() -> None:
    from pivotal.admission import TABLE

    text = generated()[generator().ADMISSION].split("## The table")[1]
    shown = re.findall(r"^\| `(\w+)` \| `([\w*]+)` \| `(\w+)` \| ", text, re.M)
    assert shown == [(r.finding.value, r.above.value, r.verdict.value) for r in TABLE]


def test_every_stage_of_admission_is_on_its_page_in_order_and_runs_what_it_names() -> None:
    import importlib

    from pivotal.admission import STAGES

    text = generated()[generator().ADMISSION].split("## The stages")[1].split("## ")[0]
    shown = re.findall(r"^\| (\d+) \| (.+?) \| `([\w.]+)` \| ", text, re.M)
    assert shown == [(str(n), s.name, s.runs) for n, s in enumerate(STAGES, 1)]
    for stage in STAGES:
        module, name = stage.runs.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), stage.runs


def test_every_request_body_field_is_on_the_http_page_under_its_operation() -> None:
    gen = generator()
    document = gen.api().openapi()
    page = generated()[gen.HTTP]
    bodies = 0
    for method, path, operation, _ in gen.operations():
        fields = gen.body_fields(document, operation)
        section = page.split(f"## {method} `{path}`\n")[1].split("\n## ")[0]
        if not fields:
            assert "Request body" not in section, (method, path)
            continue
        bodies += 1
        body = section.split("Request body, JSON:")[1]
        shown = re.findall(r"^\| `(\w+)` \| ([^|]+) \| (yes|no) \|", body, re.M)
        assert [f for f, _, _ in shown] == [f[0].strip("`") for f in fields], (method, path)
        assert all(t.strip() != "any" for _, t, _ in shown), (method, path)
    assert bodies >= 12  # approve/reject, resume, fork, bulk, saved searches, plans ...
    resume = page.split("## POST `/v1/sagas/{saga_id}/resume`\n")[1].split("\n## ")[0]
    assert "| `from` |" in resume
    assert "from_step" in resume  # the client's name, taken too


def test_every_metric_is_in_the_table_with_its_type() -> None:
    scraped = generate_latest(PivotalMetrics().registry).decode()
    served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", scraped, re.MULTILINE))
    # a counter without labels is also scraped as the time it was made: not a metric of its own
    served = {n: t for n, t in served.items() if not n.endswith("_created")}
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", generated()[generator().METRICS], re.MULTILINE)
    assert dict(rows) == served
    assert len(rows) == len(served)


def test_every_event_type_is_in_the_table() -> None:
    assert first_column(generated()[generator().EVENTS]) == [e.value for e in EventType]


def help_of(path: list[str]) -> str:
    done = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    return done.output


def listed_commands(text: str) -> list[str]:
    """The command names a group's ``--help`` lists under ``Commands:``."""
    if "Commands:" not in text:
        return []
    part = text.split("Commands:", 1)[1]
    return re.findall(r"^  ([a-z][\w-]*)", part, re.MULTILINE)


def test_every_command_and_option_its_help_shows_is_on_the_page() -> None:
    page = generated()[generator().CLI]
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    seen = set()
    pending: list[list[str]] = [[]]
    while pending:
        path = pending.pop()
        name = " ".join(["pivotal", *path])
        seen.add(name)
        text = help_of(path)
        assert name in sections, f"{name} is not on the page"
        options = re.findall(r"^  (?:-\w, )?(--[a-z][\w-]*)", text.split("Options:", 1)[-1], re.M)
        for option in options:
            if option != "--help":
                assert f"`{option}`" in sections[name], f"{name} {option}"
        pending += [[*path, sub] for sub in listed_commands(text)]
    assert set(sections) == seen


def test_every_operation_of_the_openapi_document_is_in_the_table() -> None:
    document = generator().api().openapi()
    expected = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    page = generated()[generator().HTTP]
    rows = set(re.findall(r"^\| (GET|POST|PUT|DELETE|PATCH) \| `([^`]+)` \|", page, re.M))
    assert rows == expected
    assert "| POST | `/v1/sagas` | Submit | admin, agent |" in page


NAV_PAGE = re.compile(r"^ *- (?:[^:\n]+: )?([\w/.-]+\.md)$", re.MULTILINE)
FENCE = re.compile(r"^\s*(```|~~~)")


def titles(text: str) -> list[str]:
    """The page's first-level headings, outside its code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("# "):
            found.append(line)
    return found


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    entries = NAV_PAGE.findall(nav)
    assert len(entries) == len(set(entries))
    written = {p.relative_to(PAGES).as_posix() for p in pages()}
    assert set(entries) == written | set(generated())
    assert not written & set(generated()), "a generated page would hide a written one"


def test_no_page_includes_the_readme_and_the_readme_marks_no_section() -> None:
    """The pages own their text: nothing is included from the README any more."""
    for path in pages():
        assert "--8<--" not in path.read_text(), f"{path} includes another file"
    assert "--8<--" not in README.read_text()
    assert "snippets" not in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.relative_to(PAGES).as_posix())
def test_a_written_page_begins_with_its_one_title(path: Path) -> None:
    text = path.read_text()
    assert text.startswith("# "), f"{path} does not begin with its title"
    assert len(titles(text)) == 1, titles(text)


TWO_COMMANDS = """# Pivotal

```sh
make demo    # run the documented checkout and fulfilment scenarios on embedded SQLite
make test    # lint, type-check and run the whole test suite
```
"""
README_LINES = 150


def test_the_readme_starts_with_the_two_commands_and_fits_its_budget() -> None:
    text = README.read_text()
    assert text.startswith(TWO_COMMANDS)
    assert len(text.splitlines()) <= README_LINES


SITE_PATH = re.compile(r"`(docs/site/[\w/.-]+)`")


def test_the_readme_names_every_written_page_outside_the_reference_and_only_pages() -> None:
    named = set(SITE_PATH.findall(README.read_text()))
    for path in named:
        assert (ROOT / path).exists(), f"the README names {path}, which does not exist"
    written = {f"docs/site/{p.relative_to(PAGES).as_posix()}" for p in pages()}
    guides = {p for p in written if not p.startswith("docs/site/reference/")} - {
        "docs/site/index.md"
    }
    assert guides <= named, guides - named


FIGURE = re.compile(r"\d[\d,.]*\d|\d")


def section(text: str, heading: str) -> str:
    """A section's text, from its heading to the next one of its level."""
    part = text.split(f"\n{heading}\n", 1)[1]
    return part.split("\n## ", 1)[0]


def test_the_readmes_benchmark_figures_are_those_of_the_benchmarks_page() -> None:
    headline = set(FIGURE.findall(section(README.read_text(), "## Benchmarks")))
    assert len(headline) > 10
    measured = set(FIGURE.findall((PAGES / "explanation" / "benchmarks.md").read_text()))
    assert headline <= measured, headline - measured


def concepts(text: str) -> str:
    """The table under a page's ``## Concepts`` heading."""
    rows = section(text, "## Concepts").strip().splitlines()
    return "\n".join(line for line in rows if line.startswith("|"))


def test_the_readme_and_the_home_page_define_the_same_words() -> None:
    table = concepts(README.read_text())
    assert table.count("\n") >= 5
    assert concepts((PAGES / "index.md").read_text()) == table


def test_the_configuration_fetches_nothing_from_the_network() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^  font: false$", config, re.MULTILINE)
    # material fetches mermaid from a CDN for a mermaid block, and GitHub's API for repo_url
    for fetches in ("mermaid", "repo_url", "extra_javascript", "extra_css", "emoji"):
        assert fetches not in config


LOCAL = {"127.0.0.1", "localhost", "HOST"}
URL = re.compile(r"(?:https?:)?//([A-Za-z0-9.-]+)")  # an attribute's or a sheet's
TEXT_URL = re.compile(r"https?://([A-Za-z0-9.-]+)")  # anywhere in a page
ATTRIBUTE = re.compile(r"""\b(?:src|href|srcset|action|poster|data)\s*=\s*["']?([^"'\s>]+)""")


@pytest.mark.timeout(300)
def test_the_built_site_refers_to_no_host_on_the_network(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found = []
    for page in site.rglob("*.html"):
        text = page.read_text()
        for target in ATTRIBUTE.findall(text):
            if URL.match(target):
                found.append(f"{page.relative_to(site)}: {target}")
        for host in TEXT_URL.findall(re.sub(r'xmlns(:\w+)?="http://www\.w3\.org/[^"]*"', "", text)):
            if host not in LOCAL:
                found.append(f"{page.relative_to(site)}: {host}")
    for sheet in site.rglob("*.css"):
        for target in re.findall(r"(?:url\(|@import)\s*[\"']?([^\"')\s]+)", sheet.read_text()):
            if URL.match(target):
                found.append(f"{sheet.relative_to(site)}: {target}")
    assert not found
    assert (site / "screenshots" / "workers.png").is_file()
    assert 'class="mermaid"' not in (site / "index.html").read_text()
