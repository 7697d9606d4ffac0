"""The options of a saga search (``store.search.FIELDS``), declared once: ``searching``
gives them to a command (``sagas list``, ``sagas bulk``) in place of its parameter
``filters``, which receives them as ``SagaFilter.parse`` reads them, so every command that
searches takes exactly the same filters. Private to ``pivotal.cli``."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from pivotal.sagas.state import SagaStatus
from pivotal.store.search import FIELDS, SagaFilter

ONE = "<str>"  # what a filter of one value shows, as the other options do
_WHEN = "a duration back from now (7d, 24h, 30m) or an ISO date or date-time (UTC unless given)"

Status = Annotated[
    list[str] | None,
    typer.Option(
        metavar="STATUS",
        help="Only these statuses (repeat it, or separate by commas): "
        + ", ".join(s.value for s in SagaStatus)
        + ".",
    ),
]
CatalogueName = Annotated[list[str] | None, typer.Option(metavar=ONE, help="Only this catalogue.")]
CreatedSince = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help=f"Created at or after: {_WHEN}.")
]
CreatedUntil = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="Created at or before (as --created-since).")
]
UpdatedSince = Annotated[
    list[str] | None,
    typer.Option(metavar=ONE, help="Last changed at or after (as --created-since)."),
]
UpdatedUntil = Annotated[
    list[str] | None,
    typer.Option(metavar=ONE, help="Last changed at or before (as --created-since)."),
]
ActorType = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="Proposed by an agent, human or system.")
]
ActorId = Annotated[list[str] | None, typer.Option(metavar=ONE, help="Proposed by this actor.")]
Model = Annotated[list[str] | None, typer.Option(metavar=ONE, help="Planned by this model.")]
RunId = Annotated[list[str] | None, typer.Option(metavar=ONE, help="From this planning run.")]
PromptVersion = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="Planned with this prompt version.")
]
OnBehalfOf = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="Proposed for this person.")
]
SourceDocumentId = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="Planned from this source document.")
]
FailedStep = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="Whose step of this name failed.")
]
ReasonHolds = Annotated[
    list[str] | None,
    # not --reason: that is what a person records (why they act), e.g. on sagas bulk
    typer.Option("--reason-holds", metavar=ONE, help="Whose reason holds this text (any case)."),
]
About = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=VALUE",
        help="Whose plan names this argument value, e.g. order_id=4471 (repeat: all).",
    ),
]
Sort = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="By created (the default) or updated time.")
]
Order = Annotated[
    list[str] | None, typer.Option(metavar=ONE, help="desc (newest first, the default) or asc.")
]

Filters = dict[str, Any]  # the filters as a command received them, for SagaFilter.parse


def _option(name: str, annotation: Any, default: Any = None) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation
    )


# every filter of ``FIELDS``, in its order, as an option (a test holds them to it)
FILTERS = (
    _option("status", Status),
    _option("catalogue", CatalogueName),
    _option("created_since", CreatedSince),
    _option("created_until", CreatedUntil),
    _option("updated_since", UpdatedSince),
    _option("updated_until", UpdatedUntil),
    _option("actor_type", ActorType),
    _option("actor_id", ActorId),
    _option("model", Model),
    _option("run_id", RunId),
    _option("prompt_version", PromptVersion),
    _option("on_behalf_of", OnBehalfOf),
    _option("source_document_id", SourceDocumentId),
    _option("failed_step", FailedStep),
    _option("reason", ReasonHolds),
    _option("about", About),
    _option("sort", Sort),
    _option("order", Order),
)
# the filters that take one value: given twice, the command is refused (Typer would keep
# the last one, quietly), as the API and the pages refuse it
ONCE = {
    "catalogue": "--catalogue",
    "created_since": "--created-since",
    "created_until": "--created-until",
    "updated_since": "--updated-since",
    "updated_until": "--updated-until",
    "actor_type": "--actor-type",
    "actor_id": "--actor-id",
    "model": "--model",
    "run_id": "--run-id",
    "prompt_version": "--prompt-version",
    "on_behalf_of": "--on-behalf-of",
    "source_document_id": "--source-document-id",
    "failed_step": "--failed-step",
    "reason": "--reason-holds",
    "sort": "--sort",
    "order": "--order",
}
DEFAULTS = {"sort": "created", "order": "desc"}


def _once(name: str, values: list[str] | None) -> str | None:
    """The one value of a filter that takes one; refused when given more than once."""
    if values and len(values) > 1:
        raise typer.BadParameter(
            f"given {len(values)} times; a search takes it once", param_hint=ONCE[name]
        )
    return values[0] if values else DEFAULTS.get(name)


def searching(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the search's options (``FILTERS``) in place of its parameter
    ``filters`` (which comes after its parameters without a default), and that parameter
    given them as received (``SagaFilter.given``: a ``Filters``)."""
    own = inspect.signature(command, eval_str=True)
    params = list(own.parameters.values())
    at = [p.name for p in params].index("filters")
    merged = [*params[:at], *FILTERS, *params[at + 1 :]]

    @functools.wraps(command)
    def with_filters(*args: Any, **kwargs: Any) -> None:
        received = {name: kwargs.pop(name) for name in FIELDS}
        given = SagaFilter.given({n: _once(n, v) if n in ONCE else v for n, v in received.items()})
        command(*args, filters=given, **kwargs)

    # what Typer reads the options from
    signature = own.replace(parameters=merged)
    setattr(with_filters, "__signature__", signature)  # noqa: B010
    with_filters.__annotations__ = {p.name: p.annotation for p in merged} | {
        "return": own.return_annotation
    }
    return with_filters
