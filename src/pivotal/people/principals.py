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

from pivotal.errors import InvalidInput
from pivotal.people.skeleton import ascii_digits, skeleton

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


# The characters of a person's name, on every surface that takes one (a plan's
# on_behalf_of, --by, a token's name): a name is a name, not a document.
MAX_PERSON = 200

# Characters that draw as nothing, though Unicode does not call them default-ignorable
# (those the skeleton removes already): the braille blank and the musical null notehead,
# and the Hangul fillers (which are, named here too for whoever reads the list).
BLANK_GLYPHS = frozenset(map(ord, "\u2800\u3164\u115f\u1160\uffa0\U0001d159"))

# A name is folded again until folding changes nothing (a prototype may be a capital, or a
# compatibility form): three folds at most for any one character of the data kept here.
ROUNDS = 4


def names_someone(name: str) -> bool:
    """Whether ``name`` names a person (its canonical name is not ""), wherever a person
    acts: ``InvalidInput`` for a name over ``MAX_PERSON`` characters, on every surface."""
    if len(name) > MAX_PERSON:
        raise InvalidInput(
            f"a person's name is at most {MAX_PERSON} characters, not {len(name)}: nothing "
            "was changed"
        )
    return bool(canonical_person(name))


def canonical_person(name: str) -> str:
    """The one name a person is compared by, wherever one person is told from another
    (four-eyes, ``on_behalf_of``, a token's name, a saga's owner, a browser session): two
    names are one person when their canonical names are equal.

    Folded: Unicode compatibility forms (NFKC: a fullwidth "\\uff21" is "A") and case
    (casefold); every default-ignorable code point removed wherever it is (a soft hyphen,
    a zero-width or bidi mark, an invisible separator, a tag character, a combining
    grapheme joiner, a variation selector, a Hangul filler), and every control character
    that is not a blank; every character that looks like another replaced by the one it
    looks like (UTS #39's skeleton: a Cyrillic "\\u0430" is a Latin "a"); a decimal digit of
    any script is its ASCII digit, and a character that draws as nothing (``BLANK_GLYPHS``:
    the braille blank, a Hangul filler) is removed; blanks collapsed
    to one space and stripped at both ends. "Ann", "A\\u00adnn", "\\u0430nn" and
    "ann\\u200f " are one person; a name of only such characters is "" (no one): refuse it
    wherever a person must be named. The result is for comparing, not for showing (it is in
    NFD, and "m" is "rn" in it); folding it again changes nothing."""
    if len(name) > MAX_PERSON:  # refused wherever a name is taken: not kept in the cache
        return _folded(name)
    return _canonical(name)


@functools.lru_cache(maxsize=4096)  # at most 4,096 names of at most 200 characters
def _canonical(name: str) -> str:
    return _folded(name)


def _folded(name: str) -> str:
    folded = _fold(name)
    for _ in range(ROUNDS):
        again = _fold(folded)
        if again == folded:
            break
        folded = again
    return folded


def _fold(name: str) -> str:
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    shown = "".join(
        c
        for c in ascii_digits(text)
        if (c.isspace() or unicodedata.category(c) != "Cc") and ord(c) not in BLANK_GLYPHS
    )
    return " ".join(skeleton(shown).split())
