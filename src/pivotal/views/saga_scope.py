"""Saga ids as agents give them: each agent has its own namespace.

An agent's id (``order-4471``, or the one Pivotal makes when it gives none) is stored as
``<slug>.<hash>.<id>``: the slug is a readable part of the agent's canonical name
(``principals.canonical_person``, so the tokens of one principal share it), the hash is the
first 12 hex digits of that name's sha256. The slug holds no ``.`` and the hash has a fixed
length, so two agents never map one id to the same stored id: another agent can neither take
an id (it gets its own saga) nor learn that one exists (no 409, and reading an id it does not
own is the same 404 as a missing one).

Every agent-facing surface (the HTTP agent routes, the MCP tools) goes through here, both
ways: ``submit`` and ``find`` take the agent's id, ``shown``/``view`` give it back. People
(operators, approvers, admins, the CLI) see and use the full stored id.

Sagas an agent submitted before ids were scoped keep their bare id: ``find`` reads them, and
``submit`` of the same id returns (or refuses, 409) the agent's own one instead of running
the plan a second time; another agent's bare id is ignored, as if it did not exist. So do
the sagas stored before canonical names folded look-alike characters and every
default-ignorable one (``earlier_namespace``): they keep the namespace they were given."""

from __future__ import annotations

import hashlib
import unicodedata
from typing import TYPE_CHECKING

from pivotal.errors import InvalidInput, SagaConflict
from pivotal.people.principals import canonical_person
from pivotal.sagas import saga_ids
from pivotal.views.agent_view import SagaView, agent_saga

if TYPE_CHECKING:
    from pivotal.declarations.plan import Plan
    from pivotal.orchestration.orchestrator import Orchestrator
    from pivotal.sagas.state import SagaState
    from pivotal.store.base import Store, StoredSaga

SLUG_LEN = 18
HASH_LEN = 12
MAX_STORED = saga_ids.MAX_LENGTH  # what the ledger takes
MAX_ID = MAX_STORED - SLUG_LEN - HASH_LEN - 2  # an agent's own id: 96 characters at most
_ID = saga_ids.pattern(MAX_ID)
ID_RULE = saga_ids.rule(MAX_ID)


def namespace(agent: str) -> str:
    """The prefix of every stored id of ``agent``'s sagas (ending with ``.``)."""
    return _namespace_of(canonical_person(agent))


def _namespace_of(person: str) -> str:
    slug = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "-" for c in person)
    slug = slug[:SLUG_LEN].strip("-") or "agent"
    digest = hashlib.sha256(person.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LEN]
    return f"{slug}.{digest}."


# the characters the canonical name removed before it removed every default-ignorable one
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


def earlier_namespace(agent: str) -> str:
    """The namespace ``agent``'s sagas were stored under while canonical names only folded
    compatibility forms, case and five zero-width characters: an address of sagas stored
    then, never a test of who is who (``owns`` is)."""
    visible = unicodedata.normalize("NFKC", agent).translate(_ZERO_WIDTH)
    return _namespace_of(unicodedata.normalize("NFKC", visible.casefold()).strip())


def check(given: str) -> None:
    """``InvalidInput`` unless ``given`` is an id an agent may choose."""
    if not _ID.match(given):
        raise InvalidInput(f"saga id {given[:200]!r} must be {ID_RULE}")


def scoped(agent: str, given: str) -> str:
    """The stored id of ``agent``'s id ``given`` (``InvalidInput`` when it is not one)."""
    check(given)
    return namespace(agent) + given


def shown(agent: str, saga_id: str) -> str:
    """The id ``agent`` knows a stored saga by: without its own namespace."""
    for prefix in _namespaces(agent):
        if saga_id.startswith(prefix):
            return saga_id[len(prefix) :]
    return saga_id


def _namespaces(agent: str) -> list[str]:
    """Where ``agent``'s sagas may be stored: its namespace, then the one it had before."""
    now, before = namespace(agent), earlier_namespace(agent)
    return [now] if before == now else [now, before]


def owns(agent: str, stored: StoredSaga) -> bool:
    """Whether ``agent`` (one principal: its canonical name) submitted ``stored``."""
    actor = stored.plan.provenance.actor_id
    return actor == agent or canonical_person(actor) == canonical_person(agent) != ""


def view(agent: str, stored: StoredSaga) -> SagaView:
    """``stored`` as the agent that proposed it sees it, under the id it gave."""
    seen = agent_saga(stored)
    return seen.model_copy(update={"saga_id": shown(agent, seen.saga_id)})


async def find(
    store: Store, agent: str, given: str, *, check_owner: bool = True
) -> StoredSaga | None:
    """``agent``'s saga ``given``: in its namespace, else by the bare id (one submitted
    before ids were scoped, or the full stored id) when ``agent`` owns it; None otherwise,
    whether or not another's exists. ``check_owner=False`` (an unauthenticated local
    client) reads a bare id whoever submitted it."""
    if _ID.match(given):
        for prefix in _namespaces(agent):
            stored = await store.load(prefix + given)
            if stored is not None and (not check_owner or owns(agent, stored)):
                return stored
    if len(given) > MAX_STORED:
        return None
    stored = await store.load(given)
    if stored is None or (check_owner and not owns(agent, stored)):
        return None
    return stored


async def submit(
    orchestrator: Orchestrator, plan: Plan, agent: str, given: str | None
) -> tuple[SagaState, bool]:
    """Record ``plan`` for ``agent`` under its id ``given`` (a new one when None), as
    ``Orchestrator.submit`` does: idempotent on the id, ``SagaConflict`` for another plan
    under it; with whether it was created."""
    store = orchestrator.store
    existed = False
    if given is None:
        saga_id = namespace(agent) + saga_ids.new()
    else:
        saga_id = scoped(agent, given)
        existed = await store.load(saga_id) is not None
        # submitted before ids were scoped, or before names folded look-alikes: the same saga
        for earlier in [p + given for p in _namespaces(agent)[1:]] + [given]:
            if existed:
                break
            legacy = await store.load(earlier)
            if legacy is not None and owns(agent, legacy):
                saga_id = earlier
                existed = True
    try:
        state = await orchestrator.submit(plan, saga_id=saga_id)
    except SagaConflict:
        raise SagaConflict(f"saga id {given!r} is already used by another of your plans") from None
    return state, not existed
