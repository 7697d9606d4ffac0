"""``pivotal serve``: the HTTP API (FastAPI under uvicorn) over the ledger and the app.

Its own lines, uvicorn's and one line per request (``RequestLog``, in place of uvicorn's
access log) go to stderr as text or JSON lines (``--log-format``). FastAPI and uvicorn are
imported only when the command runs."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pivotal.cli._shared import JsonFlag, dump, run, settings_of, writing
from pivotal.observability.logs import ASGIApp, LogFormat, RequestLog, configure_logging
from pivotal.principals import Role

if TYPE_CHECKING:
    import uvicorn

    from pivotal.observability.tracing import Tracing

log = logging.getLogger("pivotal.serve")

PROXY_SECRET = "PIVOTAL_PROXY_SECRET"  # the environment variable with the proxy's secret
HEADER_TIMEOUT = 10.0  # as pivotal.server.timeouts (not imported: FastAPI comes later)
BODY_TIMEOUT = 15.0
MIN_BODY_RATE = 1024.0
KEEP_ALIVE = 5
CONCURRENCY = 1000
MAX_HEAD = 16 * 1024  # bytes of a request head uvicorn buffers at most


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
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ADDRESS",
            help="A proxy's address or network (10.0.0.0/8); repeatable. Only from these "
            "peers are --trust-proxy-header (which needs one), X-Forwarded-Proto and "
            "X-Forwarded-For believed.",
        ),
    ] = None,
    proxy_secret_header: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help=f"With --trust-proxy-header: the proxy also sends this header, holding the "
            f"secret in ${PROXY_SECRET} (16+ characters); without it the user header is "
            "ignored.",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            metavar="HOST",
            help="A host name this server answers for (.example.com: and its subdomains; "
            "*: any); repeatable. Another Host is refused with 421. Default: localhost, "
            "127.0.0.1, ::1 and --host.",
        ),
    ] = None,
    secure_cookies: Annotated[
        bool,
        typer.Option(
            "--secure-cookies",
            help="Mark the pages' cookies Secure always (else only when the request came "
            "over https, to this server or to a trusted proxy).",
        ),
    ] = False,
    header_timeout: Annotated[
        float,
        typer.Option(min=0.1, max=300, help="Seconds a client may take to send a request head."),
    ] = HEADER_TIMEOUT,
    body_timeout: Annotated[
        float,
        typer.Option(
            min=0.1, max=600, help="Seconds a request body may pause (408 and closed past it)."
        ),
    ] = BODY_TIMEOUT,
    min_body_rate: Annotated[
        float,
        typer.Option(min=1, help="Bytes a second a request body must arrive at, at least."),
    ] = MIN_BODY_RATE,
    keep_alive_timeout: Annotated[
        int, typer.Option(min=1, max=300, help="Seconds an idle connection is kept open.")
    ] = KEEP_ALIVE,
    limit_concurrency: Annotated[
        int,
        typer.Option(min=2, help="Connections and requests at once; past it new requests get 503."),
    ] = CONCURRENCY,
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
    hosts, proxies, secret = _checked(
        host, allowed_host, trusted_proxy, trust_proxy_header, proxy_secret_header
    )
    settings = settings_of(ctx)

    async def work() -> None:
        from pivotal.server import create_app
        from pivotal.server.auth import trust_proxy_header as trust

        async with writing(settings, "serve") as orch:
            api = create_app(
                orch.store,
                orch.app,
                max_body=max_body,
                telemetry=orch.telemetry.observers,
                allowed_hosts=hosts,
                trusted_proxies=proxies,
                secure_cookies=secure_cookies,
                body_timeout=body_timeout,
                min_body_rate=min_body_rate,
            )
            proxy = None
            if trust_proxy_header is not None:
                trust(
                    api,
                    trust_proxy_header,
                    proxy_role,
                    secret_header=proxy_secret_header,
                    secret=secret,
                )
                proxy = {
                    "header": trust_proxy_header,
                    "role": proxy_role.value,
                    "proxies": proxies,
                    "secret_header": proxy_secret_header,
                }
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
            config = uvicorn_config(
                api,
                host,
                port,
                tracing=tracing,
                header_timeout=header_timeout,
                keep_alive=keep_alive_timeout,
                limit_concurrency=limit_concurrency,
            )
            await uvicorn.Server(config).serve()

    with configure_logging(log_format):
        run(work())


def _checked(
    host: str,
    allowed: list[str] | None,
    proxies: list[str] | None,
    header: str | None,
    secret_header: str | None,
) -> tuple[list[str], list[str], str | None]:
    """The allowed hosts, the trusted proxies and the proxy's secret, checked."""
    from pivotal.server.guard import LOOPBACK, normal_hosts
    from pivotal.server.peers import TrustedProxies

    hosts = list(allowed or [*LOOPBACK, *([] if host in ("0.0.0.0", "::") else [host])])
    try:
        normal_hosts(hosts)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--allowed-host") from None
    trusted = list(proxies or [])
    try:
        TrustedProxies.parse(trusted)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--trusted-proxy") from None
    if header is not None and not trusted:
        raise typer.BadParameter(
            "--trust-proxy-header needs --trusted-proxy ADDRESS (repeatable): the proxies "
            "whose requests may name the principal",
            param_hint="--trusted-proxy",
        )
    secret = None
    if secret_header is not None:
        if header is None:
            raise typer.BadParameter(
                "it goes with --trust-proxy-header", param_hint="--proxy-secret-header"
            )
        if not secret_header or not all(c.isalnum() or c in "-_" for c in secret_header):
            raise typer.BadParameter("a header name is needed", param_hint="--proxy-secret-header")
        secret = os.environ.get(PROXY_SECRET, "")
        if len(secret) < 16:
            raise typer.BadParameter(
                f"the proxy's secret goes in ${PROXY_SECRET} (16 characters or more)",
                param_hint="--proxy-secret-header",
            )
    return hosts, trusted, secret


def uvicorn_config(
    api: ASGIApp,
    host: str,
    port: int,
    *,
    tracing: Tracing | None = None,
    header_timeout: float = HEADER_TIMEOUT,
    keep_alive: int = KEEP_ALIVE,
    limit_concurrency: int | None = CONCURRENCY,
) -> uvicorn.Config:
    """Uvicorn serving ``api`` behind ``RequestLog`` (and ``TraceRequests`` with
    ``tracing``), with no logging setup of its own: its lines reach the root logger's
    handler (``configure_logging``) and its access log is off (``RequestLog`` writes one
    line per request instead, without the query string).

    Slow clients are cut off: a request head must arrive within ``header_timeout`` seconds
    (``timeouts.timed_h11``), an idle connection is closed after ``keep_alive`` seconds, a
    head buffers at most ``MAX_HEAD`` bytes, and past ``limit_concurrency`` connections and
    requests at once a new request is answered 503. Uvicorn's own proxy headers are off: the
    app believes ``X-Forwarded-*`` only from its trusted proxies (``server.peers``)."""
    import uvicorn

    from pivotal.server.timeouts import timed_h11

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
        http=timed_h11(header_timeout),
        timeout_keep_alive=keep_alive,
        limit_concurrency=limit_concurrency,
        h11_max_incomplete_event_size=MAX_HEAD,
        proxy_headers=False,
    )
