"""Dead letters: an undo parked for a person, retried or settled by hand, and made due
for the workers to retry."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pivotal.clock import synced
from pivotal.errors import InvalidInput, VersionConflict
from pivotal.orchestration.submitting import Submitting
from pivotal.people.principals import names_someone
from pivotal.sagas.state import Event, EventType
from pivotal.store.base import DeadLetter

# one logger for the orchestrator, whichever floor speaks
log = logging.getLogger("pivotal.orchestrator")


@dataclass(frozen=True, slots=True)
class LettersDue:
    """What ``Orchestrator.dead_letters_due`` did: ``made``, the letters it made due (one
    settled, or retried and settled, meanwhile is not); ``noted``, whether the saga notes
    who asked (False when none was made due, or when the saga kept changing under the note:
    the letters are due all the same)."""

    made: tuple[int, ...]
    noted: bool


class Letters(Submitting):
    """A person's acts on dead letters."""

    # -- dead letters -------------------------------------------------------------------

    async def _dead_letter(self, dead_letter_id: int) -> DeadLetter:
        found = await self.store.dead_letters(None, id=dead_letter_id)
        if not found:
            raise InvalidInput(f"no dead letter {dead_letter_id}")
        return found[0]

    async def retry_dead_letter(self, dead_letter_id: int) -> bool:
        """Run a parked undo again with its undo key; True when it is now settled."""
        await synced(self.clock)  # times below are the ledger's
        letter = await self._dead_letter(dead_letter_id)
        if letter.status != "open":
            return True
        refusal = self._refusal((await self.get(letter.saga_id)).state)
        if refusal is not None:  # asked before the lease: nothing counted
            raise refusal
        async with self.lease(letter.saga_id) as lease:
            run = self._pass(await self.get(letter.saga_id), lease.epoch, self.leased(lease))
            return await self.leases.guard(
                lease, run.retry_dead_letter(letter.step, letter.retries)
            )

    async def resolve_dead_letter(self, dead_letter_id: int, by: str, reason: str) -> None:
        """Record that a person settled a parked undo by hand, and why."""
        await synced(self.clock)  # times below are the ledger's
        if not names_someone(by) or not reason.strip():
            raise InvalidInput("resolving a dead letter needs who resolved it and why")
        letter = await self._dead_letter(dead_letter_id)
        if letter.status != "open":
            raise InvalidInput(f"dead letter {dead_letter_id} is already {letter.status}")
        async with self.lease(letter.saga_id) as lease:
            run = self._pass(await self.get(letter.saga_id), lease.epoch, self.leased(lease))
            await self.leases.guard(lease, run.resolve_dead_letter(letter.step, by, reason))

    async def dead_letters_due(
        self,
        saga_id: str,
        letters: Sequence[int],
        by: str,
        search: str | None = None,
        reason: str = "",
    ) -> LettersDue:
        """Make the saga's open dead letters ``letters`` due now, for a worker's sweep to
        retry with their undo keys, and note on the saga who asked, why when they said, and
        which letters were made due (``dead_letters_due``; ``search``: the query of the
        search that selected it, for a bulk act). A letter no longer open (settled
        meanwhile) is not made due, and nothing is noted when none was. The answer says
        what was done (``LettersDue``): letters made due stay due when the note loses to a
        saga that keeps changing; it says so rather than raise."""
        if not names_someone(by):
            raise InvalidInput("retrying dead letters needs who asked for it")
        await synced(self.clock)  # times below are the ledger's
        now = self.clock.now()
        made = tuple(
            [letter for letter in letters if await self.store.schedule_dead_letter(letter, now)]
        )
        if not made:
            return LettersDue(made, noted=False)
        data: dict[str, Any] = {"by": by, "letters": list(made)}
        if reason.strip():
            data["why"] = reason.strip()
        if search is not None:
            data["search"] = search
        noted = await self._note(saga_id, EventType.DEAD_LETTERS_DUE, data, lambda e: False)
        if not noted:
            log.warning(
                "dead letters %s of saga %s are due, but who asked (%s) is not noted: the saga "
                "kept changing",
                list(made),
                saga_id,
                by,
            )
        return LettersDue(made, noted)

    async def dead_letter_due(self, dead_letter_id: int, by: str) -> LettersDue:
        """``dead_letters_due`` for one open dead letter (the API's, the page's and the
        CLI's retry): nothing made due when there is no such open letter (or it was settled
        meanwhile), and nothing changed then."""
        if not names_someone(by):
            raise InvalidInput("retrying dead letters needs who asked for it")
        found = await self.store.dead_letters("open", id=dead_letter_id)
        if not found:
            return LettersDue((), noted=False)
        return await self.dead_letters_due(found[0].saga_id, [dead_letter_id], by)

    async def _note(
        self,
        saga_id: str,
        kind: EventType,
        data: dict[str, Any],
        noted: Callable[[Event], bool],
    ) -> bool:
        """A note on ``saga_id`` (an event that changes nothing of it), unless one already
        there is ``noted``; fenced by version like every write, read again when another
        write moved it meanwhile. False when it lost that race three times: not noted."""
        for _ in range(3):
            stored = await self.get(saga_id)
            if any(noted(e) for e in await self.store.events(saga_id)):
                return True
            saga_run = self._pass(stored, None)
            try:
                await saga_run.emit(saga_run.event(kind, **data))
                return True
            except VersionConflict:
                continue
        return False
