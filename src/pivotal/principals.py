"""Principals of the HTTP API: roles, and bearer tokens kept only as hashes.

No web framework here: the command line creates and revokes tokens with it, and the server
(``pivotal.server``) checks them."""

from __future__ import annotations

import hashlib
import secrets
from enum import StrEnum

TOKEN_PREFIX = "pvt_"


class Role(StrEnum):
    AGENT = "agent"  # validate and submit plans, read its own sagas and the catalogues
    APPROVER = "approver"  # read; approve or reject pivots
    OPERATOR = "operator"  # read; dead letters, escalations, sagas parked for a person
    VIEWER = "viewer"  # read only
    ADMIN = "admin"  # everything


def new_token() -> str:
    """A fresh random bearer token (shown once; only its hash is kept)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The hash the ledger keeps of a token: sha256 of its text (the token is random and
    long, so no salt or slow hash is needed)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
