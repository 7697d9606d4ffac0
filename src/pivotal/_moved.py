"""Where a module of Pivotal's first layout lives now: ``import pivotal.exposure`` (and
``from pivotal import exposure``, ``pivotal.exposure`` after ``import pivotal``) gives the
very module ``pivotal.declarations.exposure``, the same object under both names, so code
written against the old paths (and a test that patches them) keeps working."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "pivotal.app": "pivotal.declarations.app",
    "pivotal.progress": "pivotal.sagas.progress",
    "pivotal.telemetry": "pivotal.engine.telemetry",
    "pivotal.catalogue": "pivotal.declarations.catalogue",
    "pivotal.exposure": "pivotal.declarations.exposure",
    "pivotal.identity": "pivotal.declarations.identity",
    "pivotal.plan": "pivotal.declarations.plan",
    "pivotal.plan_errors": "pivotal.declarations.plan_errors",
    "pivotal.plan_view": "pivotal.declarations.plan_view",
    "pivotal.policy": "pivotal.declarations.policy",
    "pivotal.retry": "pivotal.declarations.retry",
    "pivotal.rules": "pivotal.declarations.rules",
    "pivotal.validation": "pivotal.admission.validation",
    "pivotal.holds": "pivotal.declarations.holds",
    "pivotal.lease": "pivotal.sagas.lease",
    "pivotal.outbox": "pivotal.sagas.outbox",
    "pivotal.overdue": "pivotal.sagas.overdue",
    "pivotal.saga_ids": "pivotal.sagas.saga_ids",
    "pivotal.saga_scope": "pivotal.views.saga_scope",
    "pivotal.serving": "pivotal.declarations.serving",
    "pivotal.state": "pivotal.sagas.state",
    "pivotal.four_eyes": "pivotal.orchestration.four_eyes",
    "pivotal.principals": "pivotal.people.principals",
    "pivotal.skeleton": "pivotal.people.skeleton",
    "pivotal.agent_reasons": "pivotal.sagas.agent_reasons",
    "pivotal.agent_view": "pivotal.views.agent_view",
    "pivotal.approval_view": "pivotal.views.approval_view",
    "pivotal.call_state": "pivotal.sagas.call_state",
    "pivotal.catalogue_view": "pivotal.views.catalogue_view",
    "pivotal.render": "pivotal.views.render",
    "pivotal.report": "pivotal.views.report",
    "pivotal.worker_view": "pivotal.views.worker_view",
    "pivotal.worker_wait": "pivotal.views.worker_wait",
    "pivotal.bulk": "pivotal.operations.bulk",
    "pivotal.fork": "pivotal.orchestration.fork",
    "pivotal.listeners": "pivotal.cli.listeners",
    "pivotal.relay": "pivotal.operations.relay",
    "pivotal.rerun": "pivotal.orchestration.rerun",
    "pivotal.saga_actions": "pivotal.views.saga_actions",
    "pivotal.webhooks": "pivotal.operations.webhooks",
    "pivotal.worker": "pivotal.operations.worker",
    "pivotal.orchestrator": "pivotal.orchestration.orchestrator",
    "pivotal.planning.views": "pivotal.views.planning_view",
    "pivotal.observability.metrics_endpoint": "pivotal.server.metrics_endpoint",
}
"""A module's name in the first layout -> its name now."""


def new_name(old: str) -> str | None:
    """``pivotal.declarations.exposure`` for ``pivotal.exposure``; None for a name that
    did not move."""
    return MOVED.get(old)


class _Same(importlib.abc.Loader):
    """Gives the module of the new name for the old one, leaving it as it is."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the old name's: put it back


class MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        module = importlib.import_module(new)
        return importlib.machinery.ModuleSpec(fullname, _Same(module))


def install() -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())


def attribute(name: str) -> ModuleType:
    """``pivotal.<name>`` for a module that moved (``AttributeError`` for any other)."""
    new = new_name(f"pivotal.{name}")
    if new is None:
        raise AttributeError(f"module 'pivotal' has no attribute {name!r}")
    return importlib.import_module(f"pivotal.{name}")
