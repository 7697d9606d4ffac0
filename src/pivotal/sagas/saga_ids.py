"""What a saga id may be, said once, for every surface: 1-128 ASCII letters, digits, ``_``,
``.`` and ``-``. The ledger keeps ids of that shape only; an agent's own id is shorter
(``pivotal.views.saga_scope``: its namespace takes the rest). A new saga without an id given gets
``sg_`` and 32 hex digits."""

from __future__ import annotations

import re
import uuid

from pivotal.errors import InvalidInput

MAX_LENGTH = 128  # characters of a stored saga id
CHARACTERS = "A-Za-z0-9_.\\-"  # the class, as a regular expression writes it
# for JSON Schema and pydantic, whose ``$`` is the end of the text (Python's also matches
# before a final newline: ``pattern`` ends with ``\Z`` instead)
SCHEMA_PATTERN = rf"^[{CHARACTERS}]{{1,{MAX_LENGTH}}}$"


def rule(longest: int = MAX_LENGTH) -> str:
    """The rule in words, as every error about a saga id says it."""
    return f"1-{longest} characters of ASCII letters, digits, '_', '.' and '-'"


def pattern(longest: int = MAX_LENGTH) -> re.Pattern[str]:
    """A saga id of at most ``longest`` characters, whole."""
    return re.compile(rf"\A[{CHARACTERS}]{{1,{longest}}}\Z")


_STORED = pattern()


def check(saga_id: str | None) -> None:
    """Refuse (``InvalidInput``) an id the ledger does not keep; None: one is made."""
    if saga_id is not None and not _STORED.match(saga_id):
        raise InvalidInput(f"saga id {saga_id!r} must be {rule()}")


def missing(saga_id: str) -> str:
    """What a person is told of an id the ledger has no saga of: an id without a ``.`` may
    be one an agent gave, which the ledger keeps in the agent's namespace
    (``<agent>.<hash>.<id>``), so the message says how to find it."""
    said = f"no saga {saga_id!r}"
    if "." in saga_id or not _STORED.match(saga_id):
        return said
    return (
        f"{said}: an id an agent gave is kept in its namespace, as <agent>.<hash>.{saga_id}; "
        "its sagas are listed with their full ids by `pivotal sagas list --actor-id AGENT` "
        "(GET /v1/sagas?actor_id=AGENT)"
    )


def new() -> str:
    """A new saga id."""
    return f"sg_{uuid.uuid4().hex}"


def as_file_name(saga_id: str) -> str:
    """``saga_id`` usable as a file name: each character outside the rule becomes ``_``."""
    return re.sub(rf"[^{CHARACTERS}]", "_", saga_id)[:MAX_LENGTH] or "_"
