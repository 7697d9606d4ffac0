"""What every command module shares: consoles, global settings, opening a ledger, reading a
plan, printing results and errors. Private to ``pivotal.cli``."""

from __future__ import annotations

import asyncio
import getpass
import json
import math
import os
import sqlite3
import sys
import traceback
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import RenderableType
from rich.text import Text
from typer.core import TyperGroup

from pivotal.declarations.app import App, load_app
from pivotal.declarations.plan import DEFAULT_LIMITS, ActorType, Plan
from pivotal.declarations.plan_errors import PlanError
from pivotal.errors import (
    AppLoadError,
    InvalidInput,
    LedgerNotFound,
    PivotalError,
    PlanParseError,
    PlanRejected,
    PlanTooLarge,
    StoreError,
)
from pivotal.observability.logs import LogFields
from pivotal.observability.tracing import from_environment
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.people.principals import MAX_PERSON, names_someone
from pivotal.redaction import redact, redact_url
from pivotal.sagas.state import SagaState
from pivotal.store import Store, open_store, sqlite_path
from pivotal.terminal import SafeConsole, printable
from pivotal.views.render import status_text

T = TypeVar("T")

# Nothing printed is read as console markup or reaches the terminal as a control sequence:
# ids, names and reasons come from users and agents (SafeConsole escapes every control and
# bidi character it renders; views escape their cells with pivotal.terminal.safe_text).
# Errors are never wrapped, so a long message stays one line a terminal or a log can search.
out = SafeConsole(soft_wrap=True)
err = SafeConsole(stderr=True, soft_wrap=True)
WIDE = 10_000  # the columns a table gets under --wide: as many as it needs

EXIT_INVALID = 1  # the plan is invalid (malformed or rejected)
EXIT_ERROR = 2  # any other error, usage errors included
MAX_ID = 2**63 - 1  # the largest id a ledger stores; a larger one names nothing
MAX_LIMIT = 1_000_000
MAX_NAME = MAX_PERSON  # characters of a person's name
MAX_TEXT = 4000  # characters of a reason or note
ECHO = 200  # characters of a user's string echoed back
MESSAGE = 2000  # characters of one error message
EXAMPLE = "the bundled commerce example"
GLOBAL_OPTIONS = ("--db", "--app", "--example-app", "--version")


def brief(value: object, limit: int = ECHO) -> str:
    """``value`` as text, cut after ``limit`` characters (saying how much was left out)."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


# -- errors ------------------------------------------------------------------------------


class AppRequired(AppLoadError):
    """A command that writes to the ledger was started without naming an app."""

    code = "app_required"


# Whether the command line asked for JSON (``--json``): then an error is JSON too.
JSON_ERRORS: ContextVar[bool] = ContextVar("pivotal_json_errors", default=False)


def wants_json(args: Sequence[str]) -> bool:
    """Whether ``--json`` is among the command line's options (before a ``--``)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def _json_error(code: str, message: str, **extra: Any) -> None:
    """One JSON object on stderr, on one line: ``{"error": code, "message": ...}``."""
    body = {"error": code, "message": brief(redact(message), MESSAGE), **extra}
    sys.stderr.write(json.dumps(body, default=str) + "\n")
    sys.stderr.flush()


def print_error(code: str, message: str) -> None:
    """``error [code]: message`` on stderr, on one line, with secrets (a URL's password,
    a conninfo's ``password=``) redacted and control characters escaped; under ``--json``
    the same as one JSON object, ``{"error": code, "message": message}``, on stderr."""
    if JSON_ERRORS.get():
        _json_error(code, message)
        return
    shown = printable(brief(redact(message), MESSAGE))
    err.print(Text.assemble(("error", "red"), f" [{printable(code)}]: {shown}"))


def print_plan_errors(errors: Sequence[PlanError], outcome: str) -> None:
    """Every error in a plan, one per line, after a line saying what happened (under
    ``--json``: one JSON object, the plan's errors under ``errors``)."""
    count = f"{len(errors)} error" + ("" if len(errors) == 1 else "s")
    if JSON_ERRORS.get():
        listed = [e.to_dict() | {"message": brief(e.message, MESSAGE)} for e in errors]
        _json_error("plan_rejected", f"the plan has {count}; {outcome}", errors=listed)
        return
    print_error("plan_rejected", f"the plan has {count}; {outcome}")
    for e in errors:
        line = f"  [{e.code.value}] {e.where()}: {brief(e.message, MESSAGE)}"
        err.print(Text(printable(line)))


def _click_class(name: str) -> type[Exception]:
    """A click exception class, whichever click this Typer uses (its own copy or click)."""
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == name and issubclass(cls, Exception):
            return cls
    raise LookupError(name)  # pragma: no cover


CLICK_ERROR = _click_class("ClickException")


def report(exc: BaseException) -> int:
    """Print what went wrong, as ``error [code]: message``; return the exit status."""
    if isinstance(exc, PlanRejected):
        print_plan_errors(exc.errors, "nothing was recorded")
        return EXIT_INVALID
    if isinstance(exc, PivotalError):
        print_error(exc.code, exc.message)
        return EXIT_INVALID if isinstance(exc, PlanParseError) else EXIT_ERROR
    if isinstance(exc, CLICK_ERROR):
        return _usage(exc)
    if type(exc).__name__ == "Abort":
        print_error("aborted", "aborted")
        return EXIT_INVALID
    if isinstance(exc, sqlite3.Error):  # a SQLite file failed outside a store
        print_error(StoreError.code, f"{type(exc).__name__}: {exc}")
        return EXIT_ERROR
    if isinstance(exc, OSError):  # a file or the system refused
        print_error("os_error", f"{type(exc).__name__}: {exc}")
        return EXIT_ERROR
    print_error(
        "internal_error",
        f"{type(exc).__name__}: {exc} (a bug in Pivotal; set PIVOTAL_DEBUG=1 for the traceback)",
    )
    if os.environ.get("PIVOTAL_DEBUG"):
        traceback.print_exception(exc)
    return EXIT_ERROR


def _usage(exc: Exception) -> int:
    status = int(getattr(exc, "exit_code", EXIT_ERROR))
    if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help
        exc.show()  # type: ignore[attr-defined]
        return status
    message = str(exc.format_message())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    if "No such option" in message and any(o in message for o in GLOBAL_OPTIONS):
        hint += "; --db, --app and --example-app go before the command: pivotal --db URL COMMAND"
    print_error("usage", message + hint)
    return status


class PivotalGroup(TyperGroup):
    """The root command: every error, a usage error included, ends as one line
    ``error [code]: message`` on stderr and an exit status; never a traceback. Its
    ``--json`` is the command's own (``root.json_defaults``); a command that prints no JSON
    refuses it (a usage error), so that it is never quietly ignored."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if ctx.params.get("as_json") and name is not None and command is not None:
            refuse_json_unprinted(ctx, [name], command, rest)
        return name, command, rest

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        given = list(sys.argv[1:] if args is None else args)
        as_json = JSON_ERRORS.set(wants_json(given))
        try:
            refuse_not_text(given)
            result = super().main(
                args=given,
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
            status = result if isinstance(result, int) else 0
        except Exception as exc:
            status = report(exc)
        finally:
            JSON_ERRORS.reset(as_json)
        if not standalone_mode:
            return status
        sys.exit(status)


def refuse_not_text(args: Sequence[str]) -> None:
    """``InvalidInput`` for the first argument that is not UTF-8 text (bytes the shell
    passed as they are, which Python holds as lone surrogates): every command refuses it
    before it reads or writes anything, naming the argument and showing its bytes."""
    for n, arg in enumerate(args, 1):
        try:
            arg.encode()
        except UnicodeEncodeError:
            raw = (
                arg.encode(errors="surrogateescape")
                if _escaped(arg)
                else arg.encode(errors="backslashreplace")
            )
            shown = repr(raw)[2:-1][:80]
            raise InvalidInput(
                f"argument {n} ({shown}) is not UTF-8 text: every argument must be; nothing "
                "was read or changed"
            ) from None


def _escaped(arg: str) -> bool:
    """Whether every surrogate in ``arg`` stands for a byte the shell passed (U+DC80 to
    U+DCFF), so that its bytes can be shown as given."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in arg)


def refuse_json_unprinted(ctx: Any, path: list[str], command: Any, rest: list[str]) -> None:
    """A usage error (``typer.BadParameter`` on ``--json``) when the command the rest of
    the command line names (down its groups) has no ``--json`` of its own: it prints no JSON,
    and ``pivotal --json`` would otherwise be ignored. A group without a command (its help)
    or a command it does not have is left to the group."""
    while hasattr(command, "commands"):
        if not rest or rest[0].startswith("-"):
            return
        found = command.get_command(ctx, rest[0])
        if found is None:
            return
        path, command, rest = [*path, rest[0]], found, rest[1:]
    if not any(p.name == "as_json" for p in command.params):
        raise typer.BadParameter(
            f"`pivotal {' '.join(path)}` prints no JSON (it has no --json of its own): "
            "leave --json out",
            ctx=ctx,
            param_hint="--json",
        )


def new_group(help: str) -> typer.Typer:
    """A command group: plain help (a flag shows no value), no rich error boxes."""
    return typer.Typer(
        help=help,
        no_args_is_help=True,
        rich_markup_mode=None,
        context_settings={"max_content_width": 100},
    )


# -- settings and sessions -----------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The global options: which ledger, which app."""

    db: str
    app: str | None = None
    example_app: bool = False

    @property
    def ledger(self) -> str:
        return brief(redact_url(self.db))

    def example_state(self) -> Path:
        """Where the bundled example keeps its simulated services: ``$PIVOTAL_COMMERCE_STATE``
        when set; else ``commerce.db`` beside a SQLite ledger file; else (PostgreSQL, or a
        ledger in memory) ``commerce.db`` in the working folder."""
        from pivotal.examples.commerce import STATE_ENV

        if chosen := os.environ.get(STATE_ENV):
            return Path(chosen)
        path = sqlite_path(self.db)
        if path and path != ":memory:":
            return Path(path).parent / "commerce.db"
        return Path("commerce.db")

    def describe_app(self) -> str:
        if self.app:
            return brief(self.app)
        return f"{EXAMPLE} (services in {brief(self.example_state())})"

    @contextmanager
    def loaded_app(self, writes: str | None = None) -> Iterator[App]:
        """The app named by ``--app``, else the bundled example. A command that writes to
        the ledger (``writes`` names it) takes the example only when ``--example-app``
        asks for it: it must not run the demo's catalogue against a real ledger."""
        if self.app:
            yield load_app(self.app)
            return
        if writes is not None and not self.example_app:
            raise AppRequired(
                f"`pivotal {writes}` runs catalogues against the ledger {self.ledger}, and no "
                "app was named: give --app module:attribute (or set PIVOTAL_APP), or run "
                f"{EXAMPLE} on purpose with `pivotal --example-app {writes} ...`"
            )
        from pivotal.examples.commerce import create_app

        state = self.example_state()
        try:
            if not state.parent.is_dir():
                raise AppLoadError(
                    f"{EXAMPLE} keeps its services in {brief(state)}, but the folder "
                    f"{brief(state.parent)} does not exist: create it, or check --db"
                )
            if not os.access(state.parent, os.W_OK):
                raise AppLoadError(
                    f"{EXAMPLE} keeps its services in {brief(state)}, but the folder "
                    f"{brief(state.parent)} is read-only"
                )
            app = create_app(state)
        except (OSError, sqlite3.Error) as exc:
            raise AppLoadError(
                f"{EXAMPLE} cannot keep its services in {brief(state)}: {exc}"
            ) from exc
        try:
            yield app
        finally:
            app.services.close()


def settings_of(ctx: typer.Context) -> Settings:
    found = ctx.find_object(Settings)
    return found if found is not None else Settings(db="sqlite:///pivotal.db")


def check_ledger(settings: Settings, *, create: bool = False, offers: str | None = None) -> None:
    """Refuse a SQLite ledger the command cannot mean: an empty name, a folder, a file in a
    folder that does not exist, and (unless ``create``) a file that does not exist, so that
    a mistyped ``--db`` never starts a new, empty ledger. ``offers`` names the option that
    would make one (``--create``) when the command has it."""
    path = sqlite_path(settings.db)
    if path is None or path == ":memory:":
        return  # PostgreSQL, or a URL open_store refuses with its own message
    if not path.strip():
        raise InvalidInput("--db names no file: use sqlite:///path/to/pivotal.db")
    if "\x00" in path:
        raise InvalidInput(f"--db {brief(path)!r} holds a NUL character; no file has one")
    file = Path(path)
    try:
        if file.is_dir():
            raise StoreError(f"the ledger {brief(path)} is a folder; name a file in it")
        if create and not file.parent.is_dir():
            raise LedgerNotFound(
                f"the folder {brief(file.parent)} of the ledger {brief(path)} does not exist: "
                "create it, or check --db"
            )
        if not create and not file.is_file():
            raise LedgerNotFound(_no_ledger(path, offers))
        if not os.access(file.parent, os.W_OK):
            raise StoreError(
                f"the folder {brief(file.parent)} of the ledger {brief(path)} is read-only; "
                "SQLite writes beside the ledger (its -wal and -shm files), even to read it"
            )
    except OSError as exc:
        raise StoreError(f"cannot use the ledger {brief(path)}: {exc.strerror}") from exc


def _no_ledger(path: str, offers: str | None) -> str:
    """Why a missing ledger file is refused, and what to do."""
    if offers is not None:
        return (
            f"no ledger at {brief(path)}; {offers} to make one (else check --db, or "
            "PIVOTAL_DATABASE_URL)"
        )
    return (
        f"no ledger at {brief(path)}: check --db (or PIVOTAL_DATABASE_URL); this command "
        "never creates one (`pivotal migrate` does)"
    )


Create = Annotated[
    bool,
    typer.Option(
        "--create",
        help="Make the SQLite ledger when its file does not exist (else that is an error: "
        "a mistyped --db never starts a new, empty ledger).",
    ),
]


@asynccontextmanager
async def reading(settings: Settings) -> AsyncIterator[Store]:
    """The ledger, opened for a command that only reads: it is never created."""
    check_ledger(settings, create=False)
    store = open_store(settings.db, create=False)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def writing(
    settings: Settings,
    command: str,
    *,
    app: App | None = None,
    migrate: bool = False,
    create: bool | None = None,
    **orchestrator: Any,
) -> AsyncIterator[Orchestrator]:
    """The ledger and an orchestrator over the app, for ``command``, which writes. A
    missing SQLite file is made only when ``create`` is true (the command's ``--create``);
    None: the command has no such option, and never makes one."""
    offers = None if create is None else "--create"
    check_ledger(settings, create=bool(create), offers=offers)
    with settings.loaded_app(writes=command) if app is None else _given(app) as chosen:
        tracing = from_environment()  # PIVOTAL_TRACES=console|otlp; None when off
        observers = [*orchestrator.pop("telemetry", ()), LogFields()]
        if tracing is not None:
            observers.append(tracing)
        store = open_store(settings.db, migrate=migrate, create=bool(create))
        await store.open()
        try:
            yield Orchestrator(store, chosen, telemetry=observers, **orchestrator)
        finally:
            await store.close()
            if tracing is not None:
                tracing.close()


@contextmanager
def _given(app: App) -> Iterator[App]:
    yield app


def run(work: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(work)


# -- input and output ----------------------------------------------------------------------


def read_plan(path: Path) -> bytes:
    """The plan's bytes from ``path`` (``-``: stdin), at most as many as a plan may have."""
    limit = DEFAULT_LIMITS.max_bytes
    where = "on stdin" if str(path) == "-" else brief(path)
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with path.open("rb") as file:
                data = file.read(limit + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PlanParseError(f"cannot read the plan {where}: {reason}") from None
    if len(data) > limit:
        raise PlanTooLarge(f"the plan {where} is larger than {limit} bytes, the most read")
    return data


def show(view: RenderableType, *, wide: bool = False) -> None:
    """A table (or a view made of tables) on stdout: fitted to the terminal's width, or
    under ``--wide`` at the width its cells need, nothing folded or cut."""
    if not wide:
        out.print(view)
        return
    console = SafeConsole(soft_wrap=True, width=WIDE, color_system=out.color_system)
    console.print(view)


def dump(value: Any) -> None:
    """``value`` as JSON on stdout."""
    sys.stdout.write(json.dumps(value, default=str, indent=2) + "\n")
    sys.stdout.flush()


def note_cut(shown: int, total: int | None, limit: int, what: str, *, as_json: bool) -> None:
    """Say so when a list was cut at ``limit``: on stdout under a table, on stderr beside
    JSON (which stays a plain list)."""
    if shown < limit or (total is not None and total <= shown):
        return
    if total is None:
        text = f"the first {shown} {what} are shown; --limit N shows more"
    else:
        text = f"{shown} of {total} {what} shown; --limit {total} shows them all"
    (err if as_json else out).print(Text(printable(text)))


def valid_id(value: int) -> bool:
    """Whether a ledger could hold a row with this id (a larger one names nothing)."""
    return 1 <= value <= MAX_ID


def bounded(limit: int) -> Callable[[str | None], str | None]:
    """A text option's check: at most ``limit`` characters."""

    def check(value: str | None) -> str | None:
        if value is not None and len(value) > limit:
            raise typer.BadParameter(f"at most {limit} characters (this has {len(value):,})")
        return value

    return check


def finite(value: float) -> float:
    """A float option's check: nan and infinity are no number of seconds."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


# -- options shared by several commands -----------------------------------------------------

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
WideFlag = Annotated[
    bool,
    typer.Option(
        "--wide", help="Print tables at their full width, whatever the terminal's: nothing folds."
    ),
]
AllFlag = Annotated[bool, typer.Option("--all", help="Include resolved ones.")]
Limit = Annotated[
    int, typer.Option("--limit", min=1, max=MAX_LIMIT, help="Show at most this many.")
]
PlanFile = Annotated[
    Path, typer.Argument(metavar="PLAN.json", help="Plan JSON file, or - for stdin.")
]
SagaId = Annotated[str, typer.Argument(metavar="SAGA_ID", help="The saga's id.")]
SagaIdOption = Annotated[str | None, typer.Option("--saga-id", help="Idempotent saga id.")]
Who = Annotated[
    str, typer.Option("--by", help="Who decides (recorded).", callback=bounded(MAX_NAME))
]
SubmittedBy = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Who submits (recorded as the plan's proposer); by default the OS user.",
        callback=bounded(MAX_NAME),
    ),
]
Why = Annotated[str, typer.Option("--reason", help="Why (recorded).", callback=bounded(MAX_TEXT))]
Note = Annotated[
    str,
    typer.Option(
        "--reason",
        "--note",
        help="Why (recorded), as every act takes it (--note: its older name).",
        callback=bounded(MAX_TEXT),
    ),
]


OS_USER_UNKNOWN = "cli"  # the proposer when the OS cannot say who runs the command


def os_user() -> str:
    """Who runs this command, as the OS says (``getpass.getuser``); ``cli`` when it cannot
    tell (no login name in the environment, no password entry)."""
    try:
        name = getpass.getuser()
    except Exception:  # OSError, KeyError (no pwd entry), ImportError: whatever it raises
        return OS_USER_UNKNOWN
    return name.strip()[:MAX_NAME] or OS_USER_UNKNOWN


def submitted_by(plan: Plan, by: str | None) -> Plan:
    """``plan`` with who submits it from the command line as its proposer: ``--by`` when
    given (a person: actor type ``human``); else, when the plan does not name its proposer
    itself, the OS user. Never the placeholder ``unknown``."""
    given = plan.provenance.model_fields_set
    if by is not None and by.strip():
        if not names_someone(by):
            raise InvalidInput("--by names no one: give the name of the person submitting")
        update: dict[str, Any] = {"actor_id": by.strip(), "actor_type": ActorType.HUMAN}
    elif "actor_id" not in given:
        update = {"actor_id": os_user()}
        if "actor_type" not in given:
            update["actor_type"] = ActorType.HUMAN
    else:
        return plan
    provenance = plan.provenance.model_copy(update=update)
    return plan.model_copy(update={"provenance": provenance})


def outcome(state: SagaState) -> dict[str, Any]:
    """A saga's status after a decision, as JSON."""
    return {
        "saga_id": state.saga_id,
        "status": state.status.value,
        "reason": state.reason,
        "approval": asdict(state.approval) if state.approval else None,
    }


def print_outcome(state: SagaState, as_json: bool, **extra: Any) -> None:
    """``saga ID: status reason`` (or JSON with ``extra`` beside it)."""
    if as_json:
        dump(extra | outcome(state))
        return
    reason = Text(" " + printable(brief(state.reason, MESSAGE))) if state.reason else ""
    saga = Text(f"saga {printable(brief(state.saga_id))}: ")
    out.print(saga, status_text(state.status), reason, sep="")
