"""``pivotal outbox``: the messages committed with the sagas, and the relay that delivers
them (to a signed webhook, or to a Python callable). The relay needs no app: it reads and
settles the ledger's outbox directly."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from pivotal.cli._shared import (
    JsonFlag,
    Limit,
    WideFlag,
    bounded,
    brief,
    dump,
    err,
    finite,
    new_group,
    note_cut,
    out,
    reading,
    run,
    settings_of,
    show,
)
from pivotal.clock import Clock
from pivotal.errors import InvalidInput, PivotalError
from pivotal.operations.relay import CallableSink, Relay, RelayReport, Settled, Sink
from pivotal.redaction import redact
from pivotal.sagas.outbox import Message
from pivotal.store import Store
from pivotal.terminal import safe_text
from pivotal.views.render import FittedTable

outbox = new_group("Messages committed with the sagas, and their delivery.")


class Status(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"


class MessageNotFound(PivotalError):
    """No dead or delivered message with this id."""

    code = "message_not_found"


def register(cli: typer.Typer) -> None:
    """Add this module's commands to ``cli``."""
    cli.add_typer(outbox, name="outbox")


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def messages_table(items: list[Message]) -> Table:
    table = FittedTable(header_style="dim")  # readable at 80 columns: the error folds
    table.column("seq", "fixed", justify="right")
    table.column("id", "id")
    table.column("type", "text")
    table.column("status", "fixed")
    table.column("tries", "fixed", justify="right")
    table.column("due", "date")
    table.column("error", "text")
    for m in items:
        table.add_row(
            str(m.seq),
            safe_text(m.id),
            safe_text(m.type),
            m.status,
            str(m.attempts),
            _when(m.next_attempt_at) if m.status == "pending" else "",
            safe_text(brief(shown_error(m) or "", 70)),
        )
    return table


def shown_error(message: Message) -> str | None:
    """The error a person sees beside a message: its last failed attempt's, until it is
    delivered (then the error is history, not a problem)."""
    return None if message.status == Status.DELIVERED else message.last_error


@outbox.command("list")
def outbox_list(
    ctx: typer.Context,
    status: Annotated[Status | None, typer.Option(help="Only messages of this status.")] = None,
    saga: Annotated[
        str | None, typer.Option("--saga", help="Only this saga's.", callback=bounded(200))
    ] = None,
    limit: Limit = 100,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Outbox messages in outbox order (the order they are delivered in, per saga)."""

    async def work() -> list[Message]:
        async with reading(settings_of(ctx)) as store:
            return await store.messages(None if status is None else status.value, saga, limit)

    found = run(work())
    if as_json:
        dump([asdict(m) | {"payload": dict(m.payload)} for m in found])
    else:
        show(messages_table(found), wide=wide)
    note_cut(len(found), None, limit, "messages", as_json=as_json)


@outbox.command("replay")
def outbox_replay(
    ctx: typer.Context,
    message_id: Annotated[
        str, typer.Argument(metavar="ID", help="The message's id.", callback=bounded(400))
    ],
    as_json: JsonFlag = False,
) -> None:
    """Make a dead (or delivered) message due again now, with its retries started over."""

    async def work() -> bool:
        async with reading(settings_of(ctx)) as store:
            return await store.replay_message(message_id, time.time())

    if not run(work()):
        raise MessageNotFound(f"no dead or delivered message {brief(message_id)!r}")
    if as_json:
        dump({"id": message_id, "status": "pending"})
    else:
        out.print(safe_text(f"message {message_id}: due again now"))


@outbox.command("new-secret")
def outbox_new_secret(as_json: JsonFlag = False) -> None:
    """Print a new webhook secret (whsec_...) to give the receiver and the relay."""
    from pivotal.operations.webhooks import new_secret

    secret = new_secret()
    if as_json:
        dump({"secret": secret})
    else:
        out.print(secret)


def _callable_sink(spec: str) -> Sink:
    """``module:attribute``: a sink object, or an async function taking a message."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise InvalidInput(f"--callable takes module:attribute, not {brief(spec)!r}")
    try:
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except Exception as exc:  # an import runs user code: whatever it raises
        raise InvalidInput(f"cannot load --callable {brief(spec)}: {exc}") from exc
    if callable(getattr(found, "deliver", None)):
        if not isinstance(getattr(found, "name", None), str):
            found.name = spec
        sink: Sink = found
        return sink
    if not callable(found):
        raise InvalidInput(f"--callable {brief(spec)} is neither a sink nor a callable")
    return CallableSink(found, name=spec)


def webhook_secret(secret: str | None, secret_env: str | None) -> str:
    """The webhook secret given on the command line or, better, in the environment."""
    if (secret is None) == (secret_env is None):
        raise InvalidInput("a webhook needs its secret: --secret-env NAME or --secret S")
    if secret_env is not None:
        value = os.environ.get(secret_env)
        if not value:
            raise InvalidInput(f"the environment variable {brief(secret_env)} is not set")
        return value
    assert secret is not None
    return secret


@contextmanager
def _stopping(stop: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


@asynccontextmanager
async def _sinks(
    webhook: str | None,
    secret: str | None,
    allow_insecure: bool,
    callables: list[str],
    wait: float,
    *,
    flag: str = "--allow-insecure",
) -> AsyncIterator[list[Sink]]:
    """The sinks; a refused webhook URL names ``flag``, this command's way around it."""
    sinks: list[Sink] = [_callable_sink(spec) for spec in callables]
    if webhook is None:
        yield sinks
        return
    from pivotal.operations.webhooks import UnsafeWebhookURL, WebhookSink

    assert secret is not None
    try:
        hook = WebhookSink(webhook, secret, allow_insecure=allow_insecure, timeout=wait)
    except UnsafeWebhookURL as exc:  # the library names its argument; say the flag
        raise exc.with_override(flag) from None
    async with hook:
        yield [hook, *sinks]


@outbox.command("relay")
def outbox_relay(
    ctx: typer.Context,
    webhook: Annotated[
        str | None,
        typer.Option(help="POST each message here, signed.", callback=bounded(2000)),
    ] = None,
    secret_env: Annotated[
        str | None, typer.Option(help="The webhook secret is in this environment variable.")
    ] = None,
    secret: Annotated[
        str | None, typer.Option(help="The webhook secret (visible to ps: prefer --secret-env).")
    ] = None,
    allow_insecure: Annotated[
        bool,
        typer.Option(
            "--allow-insecure",
            help="Allow http:// and private addresses (a receiver you run yourself).",
        ),
    ] = False,
    callables: Annotated[
        list[str] | None,
        typer.Option(
            "--callable", help="Also hand each message to module:attribute (a sink or a function)."
        ),
    ] = None,
    until_idle: Annotated[
        bool,
        typer.Option(
            "--until-idle", help="Stop once nothing is due, instead of at SIGTERM/SIGINT."
        ),
    ] = False,
    poll: Annotated[
        float,
        typer.Option(min=0.01, max=3600, help="Seconds between rounds when idle.", callback=finite),
    ] = 1.0,
    timeout: Annotated[
        float,
        typer.Option(min=0.1, max=300, help="Seconds a delivery may take.", callback=finite),
    ] = 10.0,
    as_json: JsonFlag = False,
) -> None:
    """Deliver the outbox, at least once and in order per saga, until SIGTERM or SIGINT (or,
    with --until-idle, until nothing is due). A receiver dedupes on the message id (the
    webhook-id header). Prints each message it settled, then the totals."""
    if webhook is None and not callables:
        raise InvalidInput("name where to deliver: --webhook URL and/or --callable module:attr")
    key = webhook_secret(secret, secret_env) if webhook is not None else None
    settled: list[dict[str, Any]] = []

    def said(message: Message, outcome: str, error: str | None) -> None:
        line = {"id": message.id, "type": message.type, "outcome": outcome, "error": error}
        settled.append(line)
        if not as_json:
            text = f"{outcome} {message.id} {message.type}"
            out.print(safe_text(text + (f": {redact(brief(error, 300))}" if error else "")))

    async def work() -> RelayReport:
        async with (
            reading(settings_of(ctx)) as store,
            _sinks(webhook, key, allow_insecure, callables or [], timeout) as sinks,
        ):
            return await _relay(store, sinks, timeout, until_idle, poll, said)

    total = run(work())
    if as_json:
        dump({"totals": asdict(total), "messages": settled})
    else:
        err.print(
            Text(
                f"relay stopped: {total.delivered} delivered, {total.failed} to retry, "
                f"{total.dead} dead"
            )
        )


async def _relay(
    store: Store,
    sinks: list[Sink],
    wait: float,
    until_idle: bool,
    poll: float,
    said: Any,
) -> RelayReport:
    relay = Relay(store, sinks, timeout=wait, lease_ttl=max(60.0, 6 * wait), on_settled=said)
    stop = asyncio.Event()
    with _stopping(stop):
        return await relay.run(until_idle=until_idle, poll=poll, stop=stop)


@dataclass(frozen=True)
class RelayOptions:
    """Where a worker's relay delivers (``pivotal worker --relay-…``); empty: no relay."""

    webhook: str | None = None
    secret: str | None = None
    allow_insecure: bool = False
    callables: tuple[str, ...] = ()
    timeout: float = 10.0
    flag: str = "--relay-allow-insecure"  # the option that allows an insecure webhook

    @property
    def wanted(self) -> bool:
        return self.webhook is not None or bool(self.callables)


@asynccontextmanager
async def relay_beside(
    store: Store,
    options: RelayOptions,
    on_settled: Settled | None,
    *,
    drain: bool,
    clock: Clock | None = None,
) -> AsyncIterator[None]:
    """Run a relay in this event loop while the body runs (a worker); on the way out it
    stops, and with ``drain`` it first delivers what is due (a worker run until idle).
    ``clock``: the worker's, so one process reads one ledger time (None: the relay follows
    the ledger on its own)."""
    if not options.wanted:
        yield
        return
    async with _sinks(
        options.webhook,
        options.secret,
        options.allow_insecure,
        list(options.callables),
        options.timeout,
        flag=options.flag,
    ) as sinks:
        relay = Relay(
            store,
            sinks,
            timeout=options.timeout,
            lease_ttl=max(60.0, 6 * options.timeout),
            on_settled=on_settled,
            clock=clock,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(relay.run(stop=stop))
        try:
            yield
        finally:
            stop.set()
            await task
        if drain:
            await relay.run(until_idle=True, poll=0.0)
