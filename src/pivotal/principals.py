"""Principals of the HTTP API: roles, bearer tokens kept only as hashes, and the one
canonical name people are compared by.

No web framework here: the command line creates and revokes tokens with it, and the server
(``pivotal.server``) checks them."""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
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


# zero width space, non-joiner, joiner; word joiner; byte order mark (zero width no-break)
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


def canonical_person(name: str) -> str:
    """The name a person is compared by, wherever one person is told from another (four-eyes,
    a token's name): Unicode compatibility forms folded (NFKC: a fullwidth "\\uff21" is "A"), the
    zero-width characters removed wherever they are, case folded, surrounding whitespace
    stripped. "Alice" and "alice\u200b " are one person; a name of only such characters is
    "" (no one)."""
    visible = unicodedata.normalize("NFKC", name).translate(_INVISIBLE)
    return unicodedata.normalize("NFKC", visible.casefold()).strip()
