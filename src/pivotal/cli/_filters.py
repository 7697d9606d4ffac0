"""The options of a saga search (``store.search.FIELDS``), shared by ``sagas list`` and
``sagas bulk``: each command takes them as parameters of these names and hands them to
``SagaFilter.parse`` with ``SagaFilter.given(locals())``. Private to ``pivotal.cli``."""

from __future__ import annotations

from typing import Annotated

import typer

from pivotal.state import SagaStatus

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
ReasonHolds = Annotated[str | None, typer.Option(help="Whose reason holds this text (any case).")]
About = Annotated[
    list[str] | None,
    typer.Option(
        metavar="NAME=VALUE",
        help="Whose plan names this argument value, e.g. order_id=4471 (repeat: all).",
    ),
]
Sort = Annotated[str, typer.Option(help="By created or updated time.")]
Order = Annotated[str, typer.Option(help="desc (newest first) or asc.")]
