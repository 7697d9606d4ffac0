"""``pivotal dev``: ``pivotal serve`` and ``pivotal worker`` as child processes over a
development ledger, restarted when the app's files change once the new code loads (``serve
--check``, in a process of its own); until then the last good app keeps running. The
children run in sessions of their own: Ctrl-C reaches this process, which stops each once
(the worker finishes its calls in flight). The files are polled (no extra dependency)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from pivotal.cli._children import pivotal_child
from pivotal.cli._shared import Create, JsonFlag, Settings, brief, check_ledger, settings_of
from pivotal.errors import AppLoadError, InvalidInput, PivotalError
from pivotal.ports import bind
from pivotal.store import migrate_ledger, open_store, sqlite_path
from pivotal.views import worker_wait

Say = Callable[..., None]  # say(event, message, **fields)
DEV_DB = "sqlite:///.pivotal-dev/pivotal.db"
EXAMPLE_MODULE = "pivotal.examples.commerce"
FRESH_CODE = {"PYTHONDONTWRITEBYTECODE": "1"}  # an edit is read anew, whatever its mtime
POLL = 0.3  # seconds between looks at the app's files
GRACE = 15.0  # seconds a child has to stop before it is told again, then killed
READY = 30.0  # seconds a new server has to answer /healthz
ROLES = ("approver", "operator")  # a token of each is printed, and revoked at the stop


class DevFailed(PivotalError):
    """A child of ``pivotal dev`` could not start."""

    code = "dev_failed"


def register(cli: typer.Typer) -> None:
    cli.command("dev")(dev)


def dev(
    ctx: typer.Context,
    db: Annotated[str | None, typer.Option("--db", help=f"Ledger URL (default {DEV_DB}).")] = None,
    app: Annotated[
        str | None, typer.Option("--app", help="Your catalogues as module:attribute.")
    ] = None,
    example_app: Annotated[
        bool, typer.Option("--example-app", help="Develop over the bundled commerce example.")
    ] = False,
    host: Annotated[str, typer.Option(help="Address the API listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65_535, help="Port the API listens on.")] = 8000,
    relay_callable: Annotated[
        list[str] | None,
        typer.Option(help="Relay the outbox to module:attribute (a sink or a function)."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Check the options, the ledger and the app; exit.")
    ] = False,
    create: Create = False,
    as_json: JsonFlag = False,
) -> None:
    """Serve the API and the pages, run a worker (and, with --relay-callable, the outbox
    relay) over a development ledger (default .pivotal-dev/pivotal.db, made when missing; another
    --db must exist, or be made with --create), print the login URL
    with a new approver token, and restart them when the app's files change (while the new
    code does not load, the last good app keeps running). Ctrl-C stops everything."""
    if not host.strip() or not host.isprintable() or len(host) > 255:
        raise typer.BadParameter("--host needs an address", param_hint="--host")
    base = _global_args(ctx, db, app, example_app)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    say = _sayer(as_json)
    chosen = base[3] if base[2] == "--app" else None
    settings = Settings(db=base[1], app=chosen, example_app=chosen is None)
    makes = create or base[1] == DEV_DB  # the development ledger is dev's own to make
    made = _dev_folder(base[1])
    with _undone_on_error(made, checking=check):
        check_ledger(settings, create=makes, offers="--create")
        files = _app_files(chosen)
        ledger, shown = settings.ledger, settings.describe_app()
        say("dev_starting", f"pivotal dev: ledger {ledger}, app {shown}", ledger=ledger, url=url)
        watched = ", ".join(str(f) for f in files)
        say(
            "dev_watching",
            f"reloading when these change: {watched}"
            if files
            else "the app's module was not found (check PYTHONPATH): no reload on change",
            files=[str(f) for f in files],
        )
        say(
            "dev_outbox",
            f"outbox: relayed to {', '.join(brief(c) for c in relay_callable)}"
            if relay_callable
            else "outbox: not relayed (no sink given: --relay-callable module:attribute delivers "
            "it; `pivotal outbox list` shows it)",
        )
        if check:
            with settings.loaded_app(writes="dev"):
                return say("dev_checked", "the app loads: pivotal dev would serve it", check=True)
        bind(host, port).close()  # a port another process holds: said now, not by a child
    if makes and not _exists(base[1]):
        asyncio.run(migrate_ledger(base[1]))
        say("dev_ledger_made", f"made the ledger {ledger}", ledger=ledger)
    relay = [a for spec in relay_callable or () for a in ("--relay-callable", spec)]
    serve = [*base, "serve", "--host", host, "--port", str(port)]
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    children: list[subprocess.Popen[bytes]] = []
    try:
        while (problem := _loads(base)) is not None:
            if not files:
                raise AppLoadError(problem)
            say("dev_app_broken", f"the app does not load: {problem}; waiting for a fix")
            _wait_for_change(say, files, _snapshot(files))
        left = _revoke_dev_tokens(base[1])  # printed by a dev that died before it could
        if left:
            say("dev_tokens_revoked", f"revoked {left} token(s) an earlier pivotal dev printed")
        tokens = {role: _token(base, role) for role in ROLES}
        children = _start(serve, [*base, "worker", "--processes", "1", *relay], url)
        for role, token in tokens.items():
            say("dev_token", f"{role} token (dev-{role}): {token}", role=role, token=token)
        say("dev_ready", f"Open {url}/ui/login and paste the approver token.", url=url)
        say("dev_api", f"API at {url} (OpenAPI at {url}/openapi.json); Ctrl-C stops everything.")
        seen = _snapshot(files)
        while True:
            seen = _wait_for_change(say, files, seen, children, base)
            if (problem := _loads(base)) is not None:
                say("dev_kept", f"the app does not load: {problem}; dev keeps the last good app")
                continue
            _stop(children)
            children = _start(serve, [*base, "worker", "--processes", "1", *relay], url)
            say("dev_reloaded", "app changed: reloaded (server and worker restarted)")
    except KeyboardInterrupt:
        say("dev_stopping", "stopping the server and the worker")
    finally:
        _stop(children)
        if _revoke_dev_tokens(base[1]):
            names = ", ".join(f"dev-{role}" for role in ROLES)
            say("dev_tokens_revoked", f"the tokens it printed ({names}) are revoked")
    say("dev_stopped", "pivotal dev stopped")


def _exists(db: str) -> bool:
    """Whether the ledger at ``db`` exists (a PostgreSQL database: as far as dev knows)."""
    path = sqlite_path(db)
    return path is None or path == ":memory:" or Path(path).is_file()


def _sayer(as_json: bool) -> Say:
    """What says a line to the developer: text, or (``--json``) one JSON object a line."""

    def say(event: str, message: str, **fields: Any) -> None:
        typer.echo(
            json.dumps({"event": event, "message": message, **fields}) if as_json else message
        )

    return say


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _global_args(ctx: typer.Context, db: str | None, app: str | None, example: bool) -> list[str]:
    """``--db URL`` and ``--app A`` or ``--example-app`` for the children: this command's
    options, else the global ones, else the development ledger."""
    settings = settings_of(ctx)
    given = ctx.parent.get_parameter_source("db") if ctx.parent is not None else None
    if db is None:
        db = settings.db if given is not None and given.name != "DEFAULT" else DEV_DB
    app = app or settings.app
    example = example or settings.example_app
    if app and example:
        raise InvalidInput("--example-app and --app name two apps; give one")
    if not app and not example:
        raise InvalidInput("`pivotal dev` needs your app: --app module:attribute, or --example-app")
    return ["--db", db, *(["--app", app] if app else ["--example-app"])]


def _dev_folder(db: str) -> Path | None:
    """The development ledger's folder, made private (whatever the umask: it holds the
    ledger) when ``db`` is that ledger; the folder when this call made it, else None."""
    path = sqlite_path(db)
    if db != DEV_DB or not path:
        return None
    folder = Path(path).parent
    made = not folder.exists()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder if made else None


@contextmanager
def _undone_on_error(made: Path | None, *, checking: bool) -> Iterator[None]:
    """An error before the ledger is made changes nothing, and nor does ``--check``: the
    folder this run made for the ledger is taken away again while it is empty."""
    try:
        yield
    except BaseException:
        _unmake(made)
        raise
    if checking:
        _unmake(made)


def _unmake(made: Path | None) -> None:
    if made is not None and made.is_dir() and not any(made.iterdir()):
        made.rmdir()


def _app_files(app: str | None) -> list[Path]:
    """The folder of the app's module: its package's files, or the module and its
    neighbours (the modules it imports beside it)."""
    module = app.partition(":")[0] if app else EXAMPLE_MODULE
    try:
        spec = importlib.util.find_spec(module)
    except Exception:  # a parent package's import runs user code: whatever it raises
        spec = None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        return []
    origin = Path(spec.origin)
    if spec.submodule_search_locations:
        return [origin.parent]
    return [origin.parent / "*.py"]


def _snapshot(files: list[Path]) -> dict[Path, tuple[int, int]]:
    """Each watched Python file's modification time and size."""
    found: list[Path] = []
    for pattern in files:
        found += pattern.parent.glob("*.py") if pattern.name == "*.py" else pattern.rglob("*.py")
    seen = {}
    for path in found:
        try:
            stat = path.stat()
        except OSError:  # deleted meanwhile: the next look sees it gone
            continue
        seen[path] = (stat.st_mtime_ns, stat.st_size)
    return seen


def _wait_for_change(
    say: Say,
    files: list[Path],
    seen: dict[Path, tuple[int, int]],
    children: Sequence[subprocess.Popen[bytes]] = (),
    base: Sequence[str] = (),
) -> dict[Path, tuple[int, int]]:
    """Wait until the watched files change and stay unchanged for a moment (an editor's
    save is often more than one write); say when a child stops by itself meanwhile."""
    reported: set[int] = set()
    while True:
        time.sleep(POLL)
        for child in children:
            if child.poll() is not None and child.pid not in reported:
                reported.add(child.pid)
                name = "the server" if "serve" in child.args else "the worker"  # type: ignore[operator]
                code = child.returncode
                say("dev_child_exited", f"{name} exited ({code}): restarted on change", code=code)
                if name == "the worker" and base:
                    worker_gone(say, base, child.pid)
        now = _snapshot(files)
        if now != seen:
            time.sleep(POLL)
            if _snapshot(files) == now:
                return now


def worker_gone(say: Say, base: Sequence[str], pid: int) -> None:
    """Said when dev's worker (process ``pid``) exited by itself: whether another worker is
    alive over the ledger (by its heartbeats, on the ledger's clock), else what to run."""
    from pivotal.operations.worker import default_name  # the name dev's worker had

    ours = default_name(pid)
    others = [name for name in _alive(base[1]) if name != ours]
    if others:
        say("dev_worker_elsewhere", f"a worker still runs over this ledger: {', '.join(others)}")
        return
    run = " ".join(["pivotal", base[0], Settings(base[1]).ledger, *base[2:], "worker"])
    say(
        "dev_no_worker",
        "no worker is alive over this ledger: submitted and approved sagas, and retries "
        f"and dead letters that fall due, wait for one; save a file of the app, or run `{run}`",
        run=run,
    )


def _alive(db: str) -> list[str]:
    """The workers alive over the ledger at ``db`` now, on its clock (none: no ledger)."""

    async def read() -> list[str]:
        try:
            store = open_store(db, create=False)
            await store.open()
        except PivotalError:
            return []
        try:
            now = await store.ledger_time()
            return worker_wait.alive(await store.list_workers(now, worker_wait.WORKERS_READ), now)
        finally:
            await store.close()

    return asyncio.run(read())


def _ran(args: list[str], **options: Any) -> tuple[int, bytes, bytes]:
    """A short command's status, stdout and stderr; killed if Ctrl-C comes meanwhile."""
    child = pivotal_child(args, env=FRESH_CODE, start_new_session=True, **options)
    try:
        out, err = child.communicate()
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child.returncode, out or b"", err or b""


def _loads(base: list[str]) -> str | None:
    """None when the app loads and the API builds over it; else why not."""
    code, _, err = _ran(
        [*base, "serve", "--check"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if code == 0:
        return None
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    last = lines[-1].partition("]: ")[2] or lines[-1] if lines else ""  # no "error [code]: "
    return last or f"`pivotal serve --check` exited {code}"


def _revoke_dev_tokens(db: str) -> int:
    """Revoke every live token ``pivotal dev`` mints (``dev-approver``, ``dev-operator``)
    in the ledger at ``db``; how many were revoked (0 when there is no ledger yet)."""

    async def revoke() -> int:
        try:
            store = open_store(db, create=False)
            await store.open()
        except PivotalError:
            return 0
        try:
            names = {f"dev-{role}" for role in ROLES}
            live = [t for t in await store.list_tokens() if t.name in names]
            live = [t for t in live if t.revoked_at is None]
            for token in live:
                await store.revoke_token(token.id, time.time())
            return len(live)
        finally:
            await store.close()

    return asyncio.run(revoke())


def _token(base: list[str], role: str) -> str:
    """A new token, made by `pivotal tokens create --role ROLE`."""
    args = [*base[:2], "tokens", "create", "--name", f"dev-{role}", "--role", role]
    code, out, _ = _ran([*args, "--same-person", "--json"], stdout=subprocess.PIPE)
    if code != 0:
        raise DevFailed(f"`pivotal tokens create --role {role}` failed (exit {code})")
    token: str = json.loads(out)["token"]
    return token


def _start(serve: list[str], work: list[str], url: str) -> list[subprocess.Popen[bytes]]:
    """The server and the worker, once the server answers (each in its own session, so
    Ctrl-C reaches only this process)."""
    server = pivotal_child(serve, env=FRESH_CODE, start_new_session=True)
    worker = pivotal_child(work, env=FRESH_CODE, start_new_session=True)
    deadline = time.monotonic() + READY
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return [server, worker]
        except OSError:
            time.sleep(0.1)
    _stop([server, worker])
    raise DevFailed(f"the server did not start at {url} (exit {server.returncode})")


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    """Ask each child to stop (SIGTERM) and wait; past GRACE, or at a second Ctrl-C, ask
    again (a worker then abandons its calls in flight, saying so), then kill."""
    for attempt in ("terminate", "terminate", "kill"):
        live = [c for c in children if c.poll() is None]
        for child in live:
            getattr(child, attempt)()
        try:
            for child in live:
                child.wait(GRACE if attempt == "terminate" else None)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue
        return
