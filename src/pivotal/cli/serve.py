"""``pivotal serve``: the HTTP API (FastAPI under uvicorn) over the ledger and the app.

Its own lines, uvicorn's and one line per request (``RequestLog``, in place of uvicorn's
access log) go to stderr as text or JSON lines (``--log-format``). FastAPI and uvicorn are
imported only when the command runs."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pivotal.cli._shared import Create, JsonFlag, dump, run, settings_of, writing
from pivotal.observability.logs import ASGIApp, LogFormat, configure_logging
from pivotal.people.principals import Role
from pivotal.ports import address_error

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

# the edge's options, as every command serving a listener takes them (``server.edge``)
AllowedHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        metavar="HOST",
        help="A host name this server answers for (.example.com: and its subdomains; "
        "*: any); repeatable. Another Host is refused with 421. Default: localhost, "
        "127.0.0.1, ::1 and --host.",
    ),
]
TrustedProxies = Annotated[
    list[str] | None,
    typer.Option(
        "--trusted-proxy",
        metavar="ADDRESS",
        help="A proxy's address or network (10.0.0.0/8); repeatable. Only from these "
        "peers are X-Forwarded-For (the client the lockout counts) and X-Forwarded-Proto "
        "believed (and --trust-proxy-header, which needs one).",
    ),
]
HeaderTimeout = Annotated[
    float,
    typer.Option(min=0.1, max=300, help="Seconds a client may take to send a request head."),
]
BodyTimeout = Annotated[
    float,
    typer.Option(
        min=0.1, max=600, help="Seconds a request body may pause (408 and closed past it)."
    ),
]
MinBodyRate = Annotated[
    float,
    typer.Option(min=1, help="Bytes a second a request body must arrive at, at least."),
]


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
        bool,
        typer.Option("--check", help="Open the ledger (never making one), build the API, exit."),
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
    trusted_proxy: TrustedProxies = None,
    proxy_secret_header: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help=f"With --trust-proxy-header: the proxy also sends this header, holding the "
            f"secret in ${PROXY_SECRET} (16+ characters); without it the user header is "
            "ignored.",
        ),
    ] = None,
    allowed_host: AllowedHosts = None,
    secure_cookies: Annotated[
        bool,
        typer.Option(
            "--secure-cookies",
            help="Mark the pages' cookies Secure always (else only when the request came "
            "over https, to this server or to a trusted proxy).",
        ),
    ] = False,
    header_timeout: HeaderTimeout = HEADER_TIMEOUT,
    body_timeout: BodyTimeout = BODY_TIMEOUT,
    min_body_rate: MinBodyRate = MIN_BODY_RATE,
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
    create: Create = False,
    as_json: JsonFlag = False,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, Swagger UI at /docs); workers run the
    sagas.

    Every call but /healthz and /readyz needs a bearer token from `pivotal tokens create`.
    """
    if not host.strip() or not host.isprintable() or len(host) > 255:
        raise typer.BadParameter("--host needs an address", param_hint="--host")
    wrong = address_error(host)
    if wrong is not None:  # with --check too: nothing binds there, the address is still read
        raise typer.BadParameter(wrong, param_hint="--host")
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
        from pivotal.cli.listeners import listener
        from pivotal.server.auth import trust_proxy_header as trust
        from pivotal.server.edge import Edge

        edge = Edge(
            allowed_hosts=tuple(hosts),
            trusted_proxies=tuple(proxies),
            max_body=max_body,
            body_timeout=body_timeout,
            min_body_rate=min_body_rate,
            header_timeout=header_timeout,
        )
        async with writing(settings, "serve", create=None if check else create) as orch:
            api = listener("api").build(
                orch,
                edge,
                telemetry=orch.telemetry.observers,
                secure_cookies=secure_cookies,
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
            from pivotal.ports import bind

            sock = bind(host, port)  # a port in use: one error line, before any other
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
                keep_alive=keep_alive_timeout,
                limit_concurrency=limit_concurrency,
            )
            with sock:
                await uvicorn.Server(config).serve(sockets=[sock])

    with configure_logging(log_format):
        run(work())


def edge_hosts(
    host: str, allowed: list[str] | None, proxies: list[str] | None
) -> tuple[list[str], list[str]]:
    """The allowed hosts (``allowed``, else loopback's names and ``host``) and the trusted
    proxies, checked (BadParameter naming the option)."""
    from pivotal.server.guard import LOOPBACK, normal_hosts
    from pivotal.server.peers import TrustedProxies as Proxies

    hosts = list(allowed or [*LOOPBACK, *([] if host in ("0.0.0.0", "::") else [host])])
    try:
        normal_hosts(hosts)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--allowed-host") from None
    trusted = list(proxies or [])
    try:
        Proxies.parse(trusted)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--trusted-proxy") from None
    return hosts, trusted


def _checked(
    host: str,
    allowed: list[str] | None,
    proxies: list[str] | None,
    header: str | None,
    secret_header: str | None,
) -> tuple[list[str], list[str], str | None]:
    """The allowed hosts, the trusted proxies and the proxy's secret, checked."""
    hosts, trusted = edge_hosts(host, allowed, proxies)
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
    header_timeout: float | None = None,
    keep_alive: int = KEEP_ALIVE,
    limit_concurrency: int | None = CONCURRENCY,
) -> uvicorn.Config:
    """Uvicorn serving ``api`` as every listener is served (``server.edge.uvicorn_config``:
    a head must arrive within ``header_timeout`` seconds, else the app's edge's)."""
    from pivotal.server.edge import uvicorn_config as config

    return config(
        api,
        host,
        port,
        tracing=tracing,
        header_timeout=header_timeout,
        keep_alive=keep_alive,
        limit_concurrency=limit_concurrency,
    )
