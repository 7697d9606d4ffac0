"""The manual's two sentences about `pivotal serve` over the demo's ledger work as written
(one on the serving page, one on the operating page): after the demo, the token command and
the serve command they give serve the login page, and `/metrics` reports what the metrics
sentence says."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_manual import commands_folder, env

from manual import page


def sentences(path: str) -> str:
    """The page's text with its lines joined: a sentence may wrap anywhere."""
    return " ".join(page(path).split())


BY_HAND = re.search(
    r"Or by hand, over the demo's ledger: `([^`]+)` and `([^`]+)`",
    sentences("how-to/serving.md"),
)
METRICS = re.search(
    r"After `make demo`, `([^`]+)` reports at `/metrics` \(([^.]+)\.",
    sentences("how-to/operating.md"),
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A folder after `make demo` (which runs `pivotal demo`): ./pivotal-demo."""
    done = run(["pivotal", "demo"], tmp_path)
    assert (tmp_path / "pivotal-demo" / "pivotal.db").is_file(), done.stderr
    return tmp_path


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    args = [str(commands_folder() / "pivotal"), *args[1:]]
    done = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


@pytest.fixture
def served(demo: Path) -> Iterator[tuple[str, str]]:
    """The manual's serve command, as written but on a free port (8000 may be taken)."""
    assert BY_HAND is not None
    assert METRICS is not None
    token_command, serve_command = BY_HAND.groups()
    assert METRICS.group(1) == serve_command  # both sentences give the same command
    printed = run(shlex.split(token_command), demo).stdout
    [token] = re.findall(r"pvt_\S+", printed)
    port = free_port()
    args = [str(commands_folder() / "pivotal"), *shlex.split(serve_command)[1:]]
    log = demo / "serve.err"
    with log.open("w") as err:
        server = subprocess.Popen(
            [*args, "--port", str(port)], cwd=demo, env=env(), stdout=subprocess.DEVNULL, stderr=err
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # only turns a hang into a failure
        while True:  # until the server answers: the event itself
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        yield url, token
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_by_hand_commands_serve_the_login_page_over_the_demo_ledger(
    served: tuple[str, str],
) -> None:
    url, token = served
    assert httpx.get(f"{url}/ui/login", timeout=10).status_code == 200
    me = httpx.get(f"{url}/v1/sagas", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert me.status_code == 200, me.text


def test_metrics_over_the_demo_ledger_are_what_the_operating_page_says(
    served: tuple[str, str],
) -> None:
    url, token = served
    reply = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert reply.status_code == 200, reply.text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }
    assert METRICS is not None
    said = METRICS.group(2)
    sagas = dict(re.findall(r"`(?:pivotal_sagas\{status=\")?(\w+)\"?\}? (\d+)`", said))
    assert sagas == {
        "completed": "3",
        "compensated": "3",
        "compensation_failed": "1",
        "needs_human": "1",
        "awaiting_approval": "1",
    }
    for status, count in sagas.items():
        assert samples[("pivotal_sagas", (("status", status),))] == int(count), status
    assert "one open dead letter, one pending approval and an empty outbox" in said
    assert samples[("pivotal_dead_letters_open", ())] == 1
    assert samples[("pivotal_approvals_pending", ())] == 1
    assert samples[("pivotal_outbox_pending", ())] == 0
