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

from pivotal.state import SagaStatus
from pivotal.store.search import FIELDS, SagaFilter

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
CatalogueName = Annotated[str | None, typer.Option(help="Only this catalogue.")]
CreatedSince = Annotated[str | None, typer.Option(help=f"Created at or after: {_WHEN}.")]
CreatedUntil = Annotated[
    str | None, typer.Option(help="Created at or before (as --created-since).")
]
UpdatedSince = Annotated[
    str | None, typer.Option(help="Last changed at or after (as --created-since).")
]
UpdatedUntil = Annotated[
    str | None, typer.Option(help="Last changed at or before (as --created-since).")
]
ActorType = Annotated[str | None, typer.Option(help="Proposed by an agent, human or system.")]
ActorId = Annotated[str | None, typer.Option(help="Proposed by this actor.")]
Model = Annotated[str | None, typer.Option(help="Planned by this model.")]
RunId = Annotated[str | None, typer.Option(help="From this planning run.")]
PromptVersion = Annotated[str | None, typer.Option(help="Planned with this prompt version.")]
OnBehalfOf = Annotated[str | None, typer.Option(help="Proposed for this person.")]
SourceDocumentId = Annotated[str | None, typer.Option(help="Planned from this source document.")]
FailedStep = Annotated[str | None, typer.Option(help="Whose step of this name failed.")]
ReasonHolds = Annotated[
    str | None,
    # not --reason: that is what a person records (why they act), e.g. on sagas bulk
    typer.Option("--reason-holds", help="Whose reason holds this text (any case)."),
]
About = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=VALUE",
        help="Whose plan names this argument value, e.g. order_id=4471 (repeat: all).",
    ),
]
Sort = Annotated[str, typer.Option(help="By created or updated time.")]
Order = Annotated[str, typer.Option(help="desc (newest first) or asc.")]

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
    _option("sort", Sort, "created"),
    _option("order", Order, "desc"),
)


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
        given = SagaFilter.given({name: kwargs.pop(name) for name in FIELDS})
        command(*args, filters=given, **kwargs)

    # what Typer reads the options from
    signature = own.replace(parameters=merged)
    setattr(with_filters, "__signature__", signature)  # noqa: B010
    with_filters.__annotations__ = {p.name: p.annotation for p in merged} | {
        "return": own.return_annotation
    }
    return with_filters
