"""The command line: parses arguments, calls the library, prints the result.

Every command group lives in a module of its own and is registered here, explicitly, so
``from pivotal.cli import cli`` has every command; nothing registers itself on import.

======================  ==============================================================
module                  commands
======================  ==============================================================
``root``                the global options: ``--db``, ``--app``, ``--example-app``,
                        ``--version``
``ops``                 ``validate``, ``execute``, ``submit``, ``worker``, ``sweep``,
                        ``migrate``
``sagas``               ``sagas list/show/resume/resolve``
``searches``            ``searches list/save/delete`` (a person's saved searches of the sagas)
``approvals``           ``approvals list/approve/reject``
``dead_letters``        ``dead-letters list/retry/resolve``
``planning``            ``plan``, ``escalations list/show/resolve``,
                        ``shadow run/report``
``demo``                ``demo``
``dev``                 ``dev`` (the API, the pages and a worker, reloaded on code changes)
``tokens``              ``tokens create/list/revoke`` (bearer tokens of the HTTP API)
``serve``               ``serve`` (the HTTP API; FastAPI is imported only when it runs)
``outbox``              ``outbox list/relay/replay`` (messages committed with the sagas)
``report``              ``report`` (what the agents' sagas did over a period)
``mcp``                 ``mcp`` (Pivotal as tools for agents; the SDK is imported only when it runs)
``workers``             ``workers`` (the workers the ledger knows: alive or not, leases held)
``_shared``             consoles, settings, sessions, errors, shared options (private)
``_progress``           what a running worker says (private)
``_stopping``           what a worker does at Ctrl-C: wait, then abandon (private)
``_processes``          ``worker --processes N``: N worker processes, started and stopped
                        by one (private)
``_children``           commands run as child processes that stop when their parent dies
                        (private)
======================  ==============================================================
"""

from __future__ import annotations

import typer

from pivotal.cli import (
    approvals,
    check_provider,
    dead_letters,
    demo,
    dev,
    mcp,
    ops,
    outbox,
    planning,
    report,
    root,
    sagas,
    searches,
    serve,
    tokens,
    workers,
)
from pivotal.cli._shared import PivotalGroup

__all__ = ["build", "cli", "main"]


def build() -> typer.Typer:
    """A new ``pivotal`` command with every command group registered."""
    app = typer.Typer(
        name="pivotal",
        cls=PivotalGroup,
        help="Durable sagas for plans proposed by AI agents.",
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"max_content_width": 100},
    )
    app.callback()(root.options)
    demo.register(app)
    dev.register(app)
    planning.register(app)
    ops.register(app)
    sagas.register(app)
    searches.register(app)
    approvals.register(app)
    dead_letters.register(app)
    tokens.register(app)
    serve.register(app)
    outbox.register(app)
    report.register(app)
    mcp.register(app)
    workers.register(app)
    check_provider.register(app)
    return app


cli = build()


def main() -> None:
    """The ``pivotal`` console script."""
    cli()
