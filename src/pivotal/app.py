"""An application: the catalogues a deployment offers, loadable by ``module:attribute``."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Iterator, Mapping

from pivotal.catalogue import Catalogue
from pivotal.errors import AppLoadError, PlanRejected
from pivotal.plan_errors import ErrorCode, PlanError

log = logging.getLogger("pivotal.app")


class App:
    """The catalogues (each with its approval policy) that plans may name."""

    def __init__(self, catalogues: Iterable[Catalogue], name: str = "app") -> None:
        self.name = name
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
        Override it in your app; the default knows nothing."""
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
    """Load ``module:attribute``: an ``App``, a ``Catalogue`` or a callable returning one."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise AppLoadError(f"app {spec!r} must look like 'package.module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AppLoadError(f"cannot import {module_name!r}: {exc}") from exc
    try:
        target: object = getattr(module, attr)
    except AttributeError:
        raise AppLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(target) and not isinstance(target, App | Catalogue):
        target = target()
    if isinstance(target, Catalogue):
        target = App([target], name=target.name)
    if not isinstance(target, App):
        raise AppLoadError(f"{spec!r} is a {type(target).__name__}, not an App or Catalogue")
    return target
