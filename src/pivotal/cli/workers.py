"""``pivotal workers``: the workers the ledger knows, whether each is alive, what it holds."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from pivotal.cli._shared import (
    JsonFlag,
    Limit,
    WideFlag,
    dump,
    note_cut,
    out,
    reading,
    run,
    settings_of,
    show,
)
from pivotal.clock import SystemClock
from pivotal.moments import age
from pivotal.store.base import WorkerInfo
from pivotal.terminal import safe_text
from pivotal.views.render import FittedTable, when
from pivotal.views.worker_view import describe, leases_text

STATE_STYLES = {"alive": "green", "stale": "yellow", "stopped": "dim"}


def register(cli: typer.Typer) -> None:
    cli.command("workers")(workers)


def workers(
    ctx: typer.Context, limit: Limit = 100, as_json: JsonFlag = False, wide: WideFlag = False
) -> None:
    """List the workers, the latest heartbeat first: alive (it beats), stale (it went
    silent: crashed, frozen or cut off; its name may be taken over) or stopped, with the
    sagas whose leases each holds, its Pivotal version and the catalogues it serves."""

    async def work() -> tuple[list[WorkerInfo], float]:
        async with reading(settings_of(ctx)) as store:
            now = SystemClock().now()
            return await store.list_workers(now, limit + 1), now

    found, now = run(work())
    shown = found[:limit]
    if as_json:
        dump([describe(w, now) for w in shown])
    elif not shown:
        out.print(Text("no workers have run against this ledger"))
    else:
        show(workers_view(shown, now), wide=wide)
    total = None if len(found) > limit else len(found)  # more than shown: how many, unknown
    note_cut(len(shown), total, limit, "workers", as_json=as_json)


def workers_view(found: list[WorkerInfo], now: float) -> Group:
    """The table, then the sagas each worker leases, a line a worker: ids a person copies
    stay whole on their line (a table at 80 columns would fold them)."""
    held = [safe_text(f"{w.name} leases {leases_text(w.leases)}") for w in found if w.leases]
    return Group(workers_table(found, now), *held)


def workers_table(found: list[WorkerInfo], now: float) -> Table:
    table = FittedTable(header_style="dim", box=None, pad_edge=False)
    for col, role in (
        ("worker", "id"),
        ("state", "fixed"),
        ("heartbeat", "fixed"),
        ("started", "date"),
        ("leases", "fixed"),
        ("version", "fixed"),
        ("catalogues", "text"),
    ):
        table.column(col, role)  # type: ignore[arg-type]
    for w in found:
        row: dict[str, Any] = describe(w, now)
        table.add_row(
            safe_text(w.name),
            Text(row["state"], style=STATE_STYLES[row["state"]]),
            f"{age(row['heartbeat_age'])} ago",
            when(w.started_at),
            str(len(w.leases)),
            safe_text(w.version or "?"),
            safe_text(", ".join(w.catalogues) or "-"),
        )
    return table
