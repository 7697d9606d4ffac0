"""``pivotal mcp``: Pivotal as tools for agents, over stdio or streamable HTTP.

Over stdio, stdout carries the protocol alone: every line Pivotal or the SDK logs goes to
stderr. Over HTTP every request needs a bearer token of role ``agent`` from
``pivotal tokens create``, and the endpoint stands behind the edge ``pivotal serve`` has
(``server.edge``: allowed hosts, cross-site refusal, the caller before the body, lockout,
body and head deadlines). The MCP SDK is imported only when the command runs."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Annotated

import typer

from pivotal.cli._shared import Create, JsonFlag, dump, run, settings_of, writing
from pivotal.cli.root import pivotal_version
from pivotal.cli.serve import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    MIN_BODY_RATE,
    AllowedHosts,
    BodyTimeout,
    HeaderTimeout,
    MinBodyRate,
    TrustedProxies,
    edge_hosts,
)
from pivotal.observability.logs import LogFormat, configure_logging

log = logging.getLogger("pivotal.mcp")


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


def register(cli: typer.Typer) -> None:
    """Add this module's commands to ``cli``."""
    cli.command("mcp")(mcp)


def mcp(
    ctx: typer.Context,
    transport: Annotated[
        Transport, typer.Option(help="stdio (started by the agent's host) or http.")
    ] = Transport.STDIO,
    host: Annotated[str, typer.Option(help="Address to listen on (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65_535, help="Port to listen on (http).")] = 8765,
    allowed_host: AllowedHosts = None,
    trusted_proxy: TrustedProxies = None,
    header_timeout: HeaderTimeout = HEADER_TIMEOUT,
    body_timeout: BodyTimeout = BODY_TIMEOUT,
    min_body_rate: MinBodyRate = MIN_BODY_RATE,
    log_format: Annotated[
        LogFormat, typer.Option(help="text, or json: one JSON object per line (on stderr).")
    ] = LogFormat.TEXT,
    create: Create = False,
    as_json: JsonFlag = False,
) -> None:
    """Serve Pivotal's planner tools to MCP clients: list_catalogues, describe_catalogue,
    validate_plan, submit_plan, get_saga. Plans are recorded; workers run them.

    Over http the endpoint is http://HOST:PORT/mcp and needs a token from
    `pivotal tokens create --role agent`; --json prints where, as one JSON line, first.
    It has the edge `pivotal serve` has: another Host than --allowed-host gets 421, a
    request from another site 403, bad tokens 429 after 20 a minute, slow requests 408.
    """
    if not host.strip() or not host.isprintable() or len(host) > 255:
        raise typer.BadParameter("--host needs an address", param_hint="--host")
    if as_json and transport is Transport.STDIO:
        raise typer.BadParameter(
            "over stdio, stdout carries the protocol alone: --json is for --transport http",
            param_hint="--json",
        )
    hosts, proxies = edge_hosts(host, allowed_host, trusted_proxy)
    settings = settings_of(ctx)

    async def work() -> None:
        from pivotal.mcp import PATH, build_server
        from pivotal.mcp.server import run_stdio

        async with writing(settings, "mcp", create=create) as orch:
            if transport is Transport.STDIO:
                log.info(
                    "serving the planner tools over stdio, ledger %s",
                    settings.ledger,
                    extra={"fields": {"event": "mcp_starting", "transport": "stdio"}},
                )
                await run_stdio(build_server(orch, version=pivotal_version()))
                return
            import uvicorn

            from pivotal.cli.listeners import listener
            from pivotal.cli.serve import uvicorn_config
            from pivotal.ports import bind
            from pivotal.server.edge import Edge

            edge = Edge(
                allowed_hosts=tuple(hosts),
                trusted_proxies=tuple(proxies),
                body_timeout=body_timeout,
                min_body_rate=min_body_rate,
                header_timeout=header_timeout,
            )
            sock = bind(host, port)
            app = listener("mcp").build(orch, edge, host=host, port=port, version=pivotal_version())
            if as_json:
                url = f"http://{host}:{port}{PATH}"
                dump({"ledger": str(settings.ledger), "url": url, "transport": "http"})
            log.info(
                "serving the planner tools at http://%s:%s%s, ledger %s",
                host,
                port,
                PATH,
                settings.ledger,
                extra={"fields": {"event": "mcp_starting", "transport": "http"}},
            )
            with sock:
                await uvicorn.Server(uvicorn_config(app, host, port)).serve(sockets=[sock])

    with configure_logging(log_format):
        run(work())
