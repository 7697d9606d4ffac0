"""``pivotal serve``: the HTTP API (FastAPI under uvicorn) over the ledger and the app.

FastAPI and uvicorn are imported only when the command runs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from pivotal.cli._shared import JsonFlag, dump, err, run, settings_of, writing
from pivotal.principals import Role


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
            api = create_app(orch.store, orch.app, max_body=max_body)
            proxy = None
            if trust_proxy_header is not None:
                trust(api, trust_proxy_header, proxy_role)
                proxy = {"header": trust_proxy_header, "role": proxy_role.value}
                if not as_json:
                    err.print(
                        Text(
                            f"trusting the {trust_proxy_header} header as the principal "
                            f"(role {proxy_role.value}): serve only behind a proxy that "
                            "strips it from clients"
                        )
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
            if check:
                if not as_json:
                    err.print(Text(f"the API over {settings.ledger} is ready to serve at {url}"))
                return
            import uvicorn

            config = uvicorn.Config(api, host=host, port=port, log_level="info")
            await uvicorn.Server(config).serve()

    run(work())
