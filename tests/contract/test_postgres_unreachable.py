"""A PostgreSQL ledger that cannot be reached fails at once, on one line naming host, port,
database and the server's own reason; a malformed URL is refused before any connection."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from typing import Any

import psycopg
import pytest

from pivotal import PostgresStore, StoreError, StoreUnreachable

# Far longer than a refused connection takes, far shorter than the pool's own 15 s timeout
# that an unreachable server used to wait out: a bound on the wait, not a timing assertion.
GENEROUS = 10


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def refused(store: PostgresStore) -> StoreUnreachable:
    with pytest.raises(StoreUnreachable) as caught:
        await asyncio.wait_for(store.open(), GENEROUS)
    return caught.value


async def test_a_closed_port_fails_at_once_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    port = closed_port()
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/ledger")
    with caplog.at_level(logging.DEBUG):
        error = await refused(store)

    assert error.code == "store_unreachable"
    assert str(error) == (
        f"cannot connect to the PostgreSQL ledger at host 127.0.0.1, port {port}, "
        "database ledger: Connection refused"
    )
    # no driver or pool chatter before it (the pool used to log each retry)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []


async def test_the_server_s_own_reason_is_given(postgres_url: str) -> None:
    missing = f"pivotal_missing_{uuid.uuid4().hex[:8]}"
    url = postgres_url.rsplit("/", 1)[0] + f"/{missing}"
    error = await refused(PostgresStore(url))

    assert "\n" not in str(error)
    assert f", database {missing}: " in str(error)
    assert str(error).endswith(f'database "{missing}" does not exist')


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://postgres@127.0.0.1:5432/db?nonsense=1", 'URI query parameter: "nonsense"'),
        ("postgresql://postgres@127.0.0.1:notaport/db", "port 'notaport' is not a port number"),
        ("postgresql://postgres@127.0.0.1:99999/db", "port '99999' is not a port number"),
        ("postgresql://ana:s3cret@[::1/db", 'matching "]" in IPv6 host address'),
        ("host=127.0.0.1 garbage", 'missing "=" after "garbage"'),
    ],
)
def test_a_malformed_url_is_refused_before_any_connection(
    url: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[Any] = []

    async def connect(*args: Any, **kwargs: Any) -> Any:
        tries.append(args)
        raise AssertionError("no connection is tried for a malformed URL")

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", connect)
    with pytest.raises(StoreError) as caught:
        PostgresStore(url)

    assert not isinstance(caught.value, StoreUnreachable)
    assert str(caught.value).startswith("invalid PostgreSQL ledger URL: ")
    assert says in str(caught.value)
    assert "s3cret" not in str(caught.value)
    assert "\n" not in str(caught.value)
    assert tries == []
