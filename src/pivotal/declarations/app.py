"""An application: the catalogues a deployment offers, loadable by ``module:attribute``."""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import cast

from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.exposure import Rates
from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.errors import AppLoadError, AppNotFound, PivotalError, PlanRejected

log = logging.getLogger("pivotal.app")


class App:
    """The catalogues (each with its approval policy) that plans may name."""

    def __init__(
        self,
        catalogues: Iterable[Catalogue],
        name: str = "app",
        *,
        rates: Rates | Mapping[tuple[str, str], Decimal] | None = None,
        sandbox: bool = False,
    ) -> None:
        self.name = name
        # its steps call their providers' sandboxes (test mode), never production: only
        # such an app may be probed by ``pivotal check-provider``, which makes real effects
        self.sandbox = sandbox
        # exchange rates into the currencies the policies count in (``exposure.Rates``):
        # an amount without a rate is never counted as 0
        self.rates = rates if isinstance(rates, Rates) else Rates(rates or {})
        self.catalogues: dict[str, Catalogue] = {}
        for c in catalogues:
            if c.name in self.catalogues:
                raise AppLoadError(f"two catalogues are named {c.name!r}")
            c.check()
            self.catalogues[c.name] = c

    def catalogue(self, name: str) -> Catalogue:
        """The catalogue ``name``; an unknown name is a rejected plan."""
        try:
            return self.catalogues[name]
        except KeyError:
            known = ", ".join(sorted(self.catalogues)) or "none"
            raise PlanRejected(
                [
                    PlanError(
                        ErrorCode.UNKNOWN_CATALOGUE,
                        f"no catalogue named {name!r}; known catalogues: {known}",
                        path="catalogue",
                    )
                ]
            ) from None

    def facts(self, context: Mapping[str, object]) -> dict[str, object]:
        """Facts from trusted systems about a request (an order's amount, its customer's
        tier), keyed like the request's structured context. Planning fills the fields a
        request leaves out with them; request text never overrides them silently.
        Override it in your app; the default knows nothing.

        Whenever a plan is validated (submitted, validated on the API, MCP or the CLI, a
        planner's attempt) or a running saga re-checked (before its point of no return,
        before an approval is recorded, on the approval page) it is asked on a thread of
        its own and bounded by the catalogue's ``default_timeout``: it must be safe to call
        from a thread other than the event loop's (its own database connection, say), and
        facts that do not answer in time count as facts that cannot be read (the plan is
        refused with ``facts_error``; a re-check asks a person)."""
        return {}

    def __iter__(self) -> Iterator[Catalogue]:
        return iter(self.catalogues.values())


def trusted_facts(app: App, context: Mapping[str, object]) -> dict[str, object]:
    """``app.facts(context)``, contained: facts that cannot be read are no facts (the rules
    that need them then refuse the plan)."""
    try:
        return dict(app.facts(context))
    except Exception as exc:
        log.warning("the app's facts could not be read for %s: %s", dict(context), exc)
        return {}


def load_app(spec: str) -> App:
    """Load ``module:attribute``: an ``App``, a ``Catalogue``, or a function of no arguments
    (an ``App`` subclass included) returning one.

    Whatever goes wrong is an ``AppLoadError`` saying what: a module that is missing, does
    not compile or raises while it is imported, a missing attribute, a function that needs
    arguments or raises, and anything else named instead of an app (a step function, a
    class, a module, a value)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise AppLoadError(f"app {spec!r} must look like 'package.module:attribute'")
    module = _import(module_name)
    try:
        target: object = getattr(module, attr)
    except AttributeError:
        raise AppLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(target, App | Catalogue):
        target = _call_factory(spec, target)
    if isinstance(target, Catalogue):
        target = App([target], name=target.name)
    if not isinstance(target, App):
        raise AppLoadError(
            f"{spec!r} gave {_describe(target)}, not an App or a Catalogue; name an App, a "
            "Catalogue, or a function of no arguments returning one"
        )
    return target


def _import(module_name: str) -> object:
    try:
        return importlib.import_module(module_name)
    except SyntaxError as exc:
        where = f"{exc.filename or module_name}, line {exc.lineno}"
        raise AppLoadError(
            f"cannot import {module_name!r}: syntax error in {where}: {exc.msg}"
        ) from exc
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise AppNotFound(_not_found(module_name, exc.name)) from exc
        raise AppLoadError(f"cannot import {module_name!r}: {exc}") from exc
    except ImportError as exc:
        raise AppLoadError(f"cannot import {module_name!r}: {exc}") from exc
    except Exception as exc:
        raise AppLoadError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    except SystemExit as exc:
        raise AppLoadError(f"importing {module_name!r} exited (code {exc.code})") from exc


def _not_found(module_name: str, missing: str) -> str:
    """Why ``missing`` (``module_name`` or a package of it) was not found: the folders
    searched besides the installed packages, and how to add the one that holds it."""
    here = os.getcwd()
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    folders = [os.path.abspath(p or here) for p in sys.path if p in ("", here) or p in given]
    searched = ", ".join([*dict.fromkeys(folders), "the installed packages"])
    unsearched = "" if here in folders else f", not the working folder {here}"
    what = "the app's module" if missing == module_name else f"a package of {module_name!r}"
    top = missing.partition(".")[0]
    return (
        f"no module {missing!r} ({what}) in the folders searched: {searched}{unsearched}; "
        f"run from the folder "
        f"that holds {top}.py or {top}/ with PYTHONPATH=. set, or add that folder to "
        "PYTHONPATH"
    )


def _call_factory(spec: str, target: object) -> object:
    """What a factory named by ``spec`` returns; anything that is not one is refused."""
    refuse = (
        f"{spec!r} is {_describe(target)}, not an App or a Catalogue; name an App, a "
        "Catalogue, or a function of no arguments returning one"
    )
    if not callable(target) or inspect.iscoroutinefunction(target):
        raise AppLoadError(refuse)
    if isinstance(target, type) and not issubclass(target, App):
        raise AppLoadError(refuse)
    try:
        needed = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    except (TypeError, ValueError):  # no signature to read: try it
        needed = []
    if needed:
        raise AppLoadError(f"{refuse} ({spec!r} needs arguments: {', '.join(needed)})")
    try:
        made: object = cast(Callable[[], object], target)()
    except PivotalError:
        raise
    except Exception as exc:
        raise AppLoadError(f"calling {spec!r} raised {type(exc).__name__}: {exc}") from exc
    if inspect.isawaitable(made):
        if inspect.iscoroutine(made):
            made.close()
        raise AppLoadError(f"{spec!r} returned an awaitable; make it a plain function")
    return made


def _describe(value: object) -> str:
    if inspect.iscoroutinefunction(value):
        return f"the async function {getattr(value, '__name__', '?')!r} (a step?)"
    if inspect.ismodule(value):
        return f"the module {value.__name__!r}"
    if isinstance(value, type):
        return f"the class {value.__name__!r}"
    if inspect.isfunction(value):
        return f"the function {value.__name__!r}"
    return f"an object of type {type(value).__name__}"
