"""``pivotal serve``: the HTTP API (FastAPI under uvicorn) over the ledger and the app.

Its own lines, uvicorn's and one line per request (``RequestLog``, in place of uvicorn's
access log) go to stderr as text or JSON lines (``--log-format``). FastAPI and uvicorn are
imported only when the command runs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pivotal.cli._shared import JsonFlag, dump, run, settings_of, writing
from pivotal.observability.logs import ASGIApp, LogFormat, RequestLog, configure_logging
from pivotal.principals import Role

if TYPE_CHECKING:
    import uvicorn

    from pivotal.observability.tracing import Tracing

log = logging.getLogger("pivotal.serve")


def register(cli: typer.Typer) -> None:
    cli.command("serve")(serve)


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65_535, help="Port to listen on.")] = 8000,
    max_body: Annotated[
        int, typer.Option(min=1024, max=64 * 1024 * 1024, help="Largest request body in bytes.")
    ] = 512 * 1024,
    check: Annotated[
        bool, typer.Option("--check", help="Open the ledger, build the API and exit.")
    ] = False,
    trust_proxy_header: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Trust this request header (e.g. X-Forwarded-User) to name the principal, "
            "with --proxy-role and no token. Off by default. Only behind a proxy that "
            "strips the header from clients and sets it itself: anyone reaching the "
            "server directly could otherwise claim any name.",
        ),
    ] = None,
    proxy_role: Annotated[
        Role, typer.Option(help="The role of principals named by --trust-proxy-header.")
    ] = Role.VIEWER,
    log_format: Annotated[
        LogFormat,
        typer.Option(help="text, or json: one JSON object per line (server and request lines)."),
    ] = LogFormat.TEXT,
    as_json: JsonFlag = False,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json); workers run the sagas.

    Every call but /healthz and /readyz needs a bearer token from `pivotal tokens create`.
    """
    if not host.strip() or not host.isprintable() or len(host) > 255:
        raise typer.BadParameter("--host needs an address", param_hint="--host")
    if trust_proxy_header is not None and (
        not trust_proxy_header
        or len(trust_proxy_header) > 100
        or not all(c.isalnum() or c in "-_" for c in trust_proxy_header)
    ):
        raise typer.BadParameter("a header name is needed", param_hint="--trust-proxy-header")
    settings = settings_of(ctx)

    async def work() -> None:
        from pivotal.server import create_app
        from pivotal.server.auth import trust_proxy_header as trust

        async with writing(settings, "serve") as orch:
            api = create_app(
                orch.store, orch.app, max_body=max_body, telemetry=orch.telemetry.observers
            )
            proxy = None
            if trust_proxy_header is not None:
                trust(api, trust_proxy_header, proxy_role)
                proxy = {"header": trust_proxy_header, "role": proxy_role.value}
                log.warning(
                    "trusting the %s header as the principal (role %s): serve only behind "
                    "a proxy that strips it from clients",
                    trust_proxy_header,
                    proxy_role.value,
                    extra={"fields": {"event": "serve_trusts_header", **proxy}},
                )
            url = f"http://{host}:{port}"
            if as_json:
                dump(
                    {
                        "ledger": str(settings.ledger),
                        "url": url,
                        "ready": True,
                        "check": check,
                        "trust_proxy_header": proxy,
                    }
                )
            fields: dict[str, Any] = {"ledger": str(settings.ledger), "url": url}
            if check:
                log.info(
                    "the API over %s is ready to serve at %s",
                    settings.ledger,
                    url,
                    extra={"fields": {"event": "serve_ready", "check": True, **fields}},
                )
                return
            log.info(
                "serving the API over %s at %s",
                settings.ledger,
                url,
                extra={"fields": {"event": "serve_starting", **fields}},
            )
            import uvicorn

            from pivotal.observability.tracing import Tracing

            tracing = next((o for o in orch.telemetry.observers if isinstance(o, Tracing)), None)
            await uvicorn.Server(uvicorn_config(api, host, port, tracing=tracing)).serve()

    with configure_logging(log_format):
        run(work())


def uvicorn_config(
    api: ASGIApp, host: str, port: int, *, tracing: Tracing | None = None
) -> uvicorn.Config:
    """Uvicorn serving ``api`` behind ``RequestLog`` (and ``TraceRequests`` with
    ``tracing``), with no logging setup of its own: its lines reach the root logger's
    handler (``configure_logging``) and its access log is off (``RequestLog`` writes one
    line per request instead, without the query string)."""
    import uvicorn

    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # a uvicorn set up earlier in this process (its default dictConfig) may have left
        # handlers of its own that stop propagation: its lines go to ours
        own = logging.getLogger(name)
        own.handlers.clear()
        own.propagate = True
        own.disabled = False
    served: ASGIApp = RequestLog(api)
    if tracing is not None:
        from pivotal.observability.tracing import TraceRequests

        served = TraceRequests(served, tracing)
    return uvicorn.Config(
        served,
        host=host,
        port=port,
        log_level="info",
        log_config=None,
        access_log=False,
    )
