"""One real ``pivotal serve`` per test module of the client's (``live_server.Served``)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from live_server import Served


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("served"))
    server.start()
    try:
        yield server
    finally:
        server.stop(signal.SIGKILL)
