"""``GET /docs``: the HTTP API's interactive reference, Swagger UI over ``/openapi.json``,
served from this process's files: Swagger UI's own (5.x, which reads OpenAPI 3.1) from the
``swagger-ui-bundle-v2`` package (module ``swagger_ui_bundle``), the page and the script
that starts it from Pivotal's (``static/api-reference.*``). Nothing
comes from another host, and the page runs no inline script, so its
Content-Security-Policy allows scripts, styles, images and requests of this origin only
(and the ``data:`` images Swagger UI's stylesheet holds).

Who may read it is who may read the document, by one rule (``gate.SPEC_PATHS``: any
principal; the gate refuses everyone else before a route runs). The assets are a fixed list
of names, each mapped to its file: any other name is 404, and no part of a request's path
ever names a file."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

import swagger_ui_bundle  # type: ignore[import-untyped]
from fastapi import APIRouter
from starlette.responses import Response

from pivotal.server.errors import NotFound
from pivotal.server.gate import REFERENCE

router = APIRouter(include_in_schema=False)

BUNDLE: Traversable = swagger_ui_bundle.swagger_ui_path  # Swagger UI's files, as packaged
OURS: Traversable = resources.files("pivotal.server") / "static"
PAGE = "api-reference.html"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# behind a credential: a browser may keep them a while, a shared cache may not
ASSET_CACHE = "private, max-age=300"


@dataclass(frozen=True)
class Asset:
    folder: Traversable
    media_type: str


ASSETS = {
    "swagger-ui-bundle.js": Asset(BUNDLE, "text/javascript"),
    "swagger-ui.css": Asset(BUNDLE, "text/css"),
    "favicon-32x32.png": Asset(BUNDLE, "image/png"),
    "api-reference.js": Asset(OURS, "text/javascript"),
}


@functools.cache
def content(name: str) -> bytes:
    """The bytes of asset ``name`` (one of ``ASSETS``), read once."""
    return (ASSETS[name].folder / name).read_bytes()


@router.get(REFERENCE)
async def reference() -> Response:
    """The reference page (HTML)."""
    return Response((OURS / PAGE).read_bytes(), media_type="text/html", headers=HEADERS)


@router.get(REFERENCE + "/assets/{name}")
async def asset(name: str) -> Response:
    """One of the page's scripts, stylesheets and images."""
    if name not in ASSETS:
        raise NotFound("the API reference has no asset of that name")
    found = ASSETS[name]
    return Response(
        content(name), media_type=found.media_type, headers={"Cache-Control": ASSET_CACHE}
    )
