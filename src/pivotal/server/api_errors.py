"""The errors only the HTTP API answers with, each with its stable ``code`` (``errors`` gives
each its status). Kept apart from FastAPI, so that ``pivotal.client`` knows them without
loading a web framework."""

from __future__ import annotations

from pivotal.errors import PivotalError


class Unauthorized(PivotalError):
    """A bearer token is required; this one is missing, unknown or revoked."""

    code = "unauthorized"


class Forbidden(PivotalError):
    """This principal's role may not do this."""

    code = "forbidden"


class NotFound(PivotalError):
    """Nothing here."""

    code = "not_found"


class BodyTooLarge(PivotalError):
    """The request body is larger than the server reads."""

    code = "body_too_large"


class DeadLetterNotFound(NotFound):
    """No open dead letter with this id."""

    code = "dead_letter_not_found"


class CatalogueNotFound(NotFound):
    """This server serves no catalogue of that name."""

    code = "catalogue_not_found"
