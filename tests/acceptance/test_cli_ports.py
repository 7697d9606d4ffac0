"""A port another process holds: one line naming the address and what to do, exit 2."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

LISTENING = [
    (["serve"], "--port"),
    (["mcp", "--transport", "http"], "--port"),
    (["dev"], "--port"),
    (["worker"], "--metrics-port"),
]


@pytest.fixture
def taken() -> Iterator[int]:
    """A port this test listens on, so that no command can."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize(("command", "option"), LISTENING, ids=lambda v: " ".join(v))
def test_a_port_in_use_is_one_line_naming_it_and_another_port(
    cli: Any, taken: int, command: list[str], option: str
) -> None:
    done = cli(*command, option, str(taken))
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()  # nothing said before it, as if it were serving
    assert line == (
        f"error [port_in_use]: 127.0.0.1:{taken} is in use by another process: "
        f"choose another {option}, or stop what listens there"
    ), done.stderr
    assert "Traceback" not in done.stderr
