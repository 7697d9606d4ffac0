"""Listening on a port: a port another process holds, an address this machine does not
have, and a free port, each as its own answer."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from pivotal.ports import CannotListen, PortInUse, bind


@pytest.fixture
def taken() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_a_port_in_use_names_the_address_and_the_option(taken: int) -> None:
    with pytest.raises(PortInUse) as refused:
        bind("127.0.0.1", taken, option="--metrics-port")
    assert refused.value.code == "port_in_use"
    assert refused.value.message == (
        f"127.0.0.1:{taken} is in use by another process: choose another --metrics-port, "
        "or stop what listens there"
    )


@pytest.mark.parametrize(
    ("host", "shown"),
    [("192.0.2.1", "192.0.2.1:"), ("no-such-host.invalid", "no-such-host.invalid:")],
)
def test_an_address_this_machine_cannot_listen_on_is_cannot_listen(host: str, shown: str) -> None:
    with pytest.raises(CannotListen) as refused:
        bind(host, 0)
    assert refused.value.code == "cannot_listen"
    assert refused.value.message.startswith(f"cannot listen on {shown}0: ")


def test_a_free_port_is_a_listening_socket() -> None:
    with bind("127.0.0.1", 0) as sock:
        host, port = sock.getsockname()
        assert host == "127.0.0.1"
        assert port > 0
        with socket.create_connection((host, port), timeout=5):
            pass
