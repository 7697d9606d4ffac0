"""``GET /metrics``: the Prometheus exposition of this process's metrics, with the ledger
gauges read at scrape time.

It needs a bearer token of any role (metrics name catalogues and steps, and show how much
work waits). Prometheus sends one with the scrape job's ``authorization`` setting::

    scrape_configs:
      - job_name: pivotal-api
        authorization:
          type: Bearer
          credentials_file: /etc/prometheus/pivotal-token   # `pivotal tokens create --role viewer`
        static_configs:
          - targets: ["pivotal.internal:8000"]

A ledger that cannot be read does not fail the scrape: ``pivotal_ledger_scrape_error`` is
1 and the counters are served as usual.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pivotal.observability.metrics import PivotalMetrics
from pivotal.server.auth import Principal, principal
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses

router = APIRouter(tags=["metrics"])


async def metrics_of(request: Request) -> PivotalMetrics:
    """The API's metrics (``create_app`` keeps them on the application's state)."""
    found: PivotalMetrics = request.app.state.pivotal_metrics
    return found


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        **responses(*AUTHED),
        200: {
            "description": "The Prometheus text exposition format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
    },
)
async def metrics(
    ctx: Annotated[Context, Depends(context)],
    chosen: Annotated[PivotalMetrics, Depends(metrics_of)],
    _who: Annotated[Principal, Depends(principal)],
) -> Response:
    """Prometheus metrics in the text exposition format (any role may read them)."""
    await chosen.refresh(ctx.store, ctx.clock.now())
    return Response(generate_latest(chosen.registry), media_type=CONTENT_TYPE_LATEST)
