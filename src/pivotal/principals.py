"""Principals of the HTTP API: roles, bearer tokens kept only as hashes, and the one
canonical name people are compared by.

No web framework here: the command line creates and revokes tokens with it, and the server
(``pivotal.server``) checks them."""

from __future__ import annotations

import functools
import hashlib
import secrets
import unicodedata
from enum import StrEnum

from pivotal.skeleton import skeleton

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


# A name is folded again until folding changes nothing (a prototype may be a capital, or a
# compatibility form): three folds at most for any one character of the data kept here.
ROUNDS = 4


def canonical_person(name: str) -> str:
    """The one name a person is compared by, wherever one person is told from another
    (four-eyes, ``on_behalf_of``, a token's name, a saga's owner, a browser session): two
    names are one person when their canonical names are equal.

    Folded: Unicode compatibility forms (NFKC: a fullwidth "\\uff21" is "A") and case
    (casefold); every default-ignorable code point removed wherever it is (a soft hyphen,
    a zero-width or bidi mark, an invisible separator, a tag character, a combining
    grapheme joiner, a variation selector, a Hangul filler), and every control character
    that is not a blank; every character that looks like another replaced by the one it
    looks like (UTS #39's skeleton: a Cyrillic "\\u0430" is a Latin "a"); blanks collapsed
    to one space and stripped at both ends. "Ann", "A\\u00adnn", "\\u0430nn" and
    "ann\\u200f " are one person; a name of only such characters is "" (no one): refuse it
    wherever a person must be named. The result is for comparing, not for showing (it is in
    NFD, and "m" is "rn" in it); folding it again changes nothing."""
    return _canonical(name)


@functools.lru_cache(maxsize=4096)
def _canonical(name: str) -> str:
    folded = _fold(name)
    for _ in range(ROUNDS):
        again = _fold(folded)
        if again == folded:
            break
        folded = again
    return folded


def _fold(name: str) -> str:
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    shown = "".join(c for c in text if c.isspace() or unicodedata.category(c) != "Cc")
    return " ".join(skeleton(shown).split())
