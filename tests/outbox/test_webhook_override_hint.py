"""A refused webhook URL says how to allow it in the words of whoever refuses it: the
library names its argument (``allow_insecure=True``), and a caller with another spelling
(the command line's ``--allow-insecure``) rewords the same refusal without the library
knowing about it; a refusal recorded at delivery names no way around at all."""

from __future__ import annotations

from pathlib import Path

import pytest

import pivotal.operations.webhooks as webhooks
from pivotal.operations.webhooks import UnsafeWebhookURL, WebhookSink, new_secret


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/x", "only https is allowed"),
        ("https://localhost/x", "localhost is this machine (SSRF guard)"),
        ("https://10.1.2.3/x", "resolves to"),
    ],
)
def test_the_library_names_its_argument(url: str, why: str) -> None:
    with pytest.raises(UnsafeWebhookURL) as refused:
        WebhookSink(url, new_secret())
    message = refused.value.message
    assert why in message
    assert message.endswith("; allow_insecure=True allows it for a receiver you run yourself")
    assert refused.value.refusal in message
    assert "allow_insecure" not in refused.value.refusal


def test_a_caller_rewords_it_with_its_own_flag() -> None:
    with pytest.raises(UnsafeWebhookURL) as refused:
        WebhookSink("http://hooks.example.com/x", new_secret())
    reworded = refused.value.with_override("--allow-insecure")
    assert isinstance(reworded, UnsafeWebhookURL)
    assert reworded.code == "webhook_unsafe"
    assert reworded.refusal == refused.value.refusal
    assert reworded.message == (
        f"{refused.value.refusal}; --allow-insecure allows it for a receiver you run yourself"
    )
    assert "allow_insecure=True" not in reworded.message


def test_the_library_names_no_command_line_flag() -> None:
    source = Path(webhooks.__file__).read_text()
    assert "--allow-insecure" not in source
    assert "--relay-allow-insecure" not in source
