"""A delivered message no longer shows the error of an attempt before it was delivered."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pivotal.cli.outbox import messages_table, shown_error
from pivotal.sagas.outbox import Message

ERROR = "ConnectError: connection refused"


def message(status: str) -> Message:
    return Message(
        "m-1", "s-1", "saga.completed", {}, 0.0, seq=1, status=status, attempts=2,
        last_error=ERROR,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("status", "shows_error"), [("pending", True), ("dead", True), ("delivered", False)]
)
def test_the_error_is_shown_until_the_message_is_delivered(status: str, shows_error: bool) -> None:
    assert (shown_error(message(status)) == ERROR) is shows_error
    console = Console(width=120, record=True, color_system=None, file=io.StringIO())
    console.print(messages_table([message(status)]))
    assert ("ConnectError" in console.export_text()) is shows_error
