"""A person at the console: approves, rejects or lets an approval expire, aborts, resumes a
parked saga (from a step, or where it stopped), resolves one, retries or resolves a dead
letter, re-runs and forks finished sagas, and acts on a search in bulk. Each act goes
through the console's orchestrator, as the CLI, the API and the pages do; an act the engine
refuses changes nothing. What a person settles by hand, they do by hand in the providers'
books too: the effect is made (or moved back) outside the provider, as a person would."""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from pivotal.errors import PivotalError
from pivotal.operations import bulk
from pivotal.orchestration.fork import Edit
from pivotal.sagas.state import EventType, SagaState, SagaStatus, UndoStatus
from pivotal.store.search import SagaFilter
from pivotal.testing.sim.hosts import Host, HostGone
from pivotal.testing.sim.world import World

PEOPLE = ("olga", "ben")
WAITING = (
    SagaStatus.NEEDS_HUMAN,
    SagaStatus.COMPENSATION_FAILED,
    SagaStatus.AWAITING_APPROVAL,
)


class Person:
    """One person's acts in a run, with what became of them."""

    def __init__(self, console: Host, world: World, rng: random.Random, sagas: list[str]):
        self.console = console
        self.orch = console.orchestrator
        self.world = world
        self.rng = rng
        self.sagas = sagas  # every saga of the run; re-runs and forks are added to it
        self.acts: Counter[str] = Counter()
        self.violations: list[str] = []

    def who(self) -> str:
        return self.rng.choice(PEOPLE)

    async def _try(self, name: str, act: Callable[[], Awaitable[Any]]) -> Any:
        try:
            found = await act()
        except HostGone:
            raise
        except PivotalError as exc:  # refused: nothing changed
            self.acts[f"{name}: refused ({exc.code})"] += 1
            return None
        except Exception as exc:  # a bug the act ran into
            self.violations.append(f"{name} raised {type(exc).__name__}: {exc}")
            return None
        self.acts[name] += 1
        return found if found is not None else True

    async def _pick(self) -> str:
        """A saga to look at: as often as not one that waits for a person."""
        if self.rng.random() < 0.5:
            status = self.rng.choice(WAITING)
            waiting = sorted(s.saga_id for s in await self.orch.store.list_sagas(status))
            if waiting:
                return self.rng.choice(waiting)
        return self.rng.choice(self.sagas)

    async def act(self) -> None:
        """Look at one saga, and do what its state invites."""
        saga_id = await self._pick()
        stored = await self.orch.store.load(saga_id)
        if stored is None:
            return
        state = stored.state
        roll = self.rng.random()
        o, by = self.orch, self.who()
        if state.status is SagaStatus.AWAITING_APPROVAL:
            run = self.rng.random() < 0.5
            if roll < 0.6:
                await self._try("approve", lambda: o.approve(saga_id, by, "ok", run=run))
            elif roll < 0.8:
                await self._try("reject", lambda: o.reject(saga_id, by, "no", run=run))
        elif state.status in (SagaStatus.SUBMITTED, SagaStatus.RUNNING):
            if roll < 0.15:
                await self._try("abort", lambda: o.abort(saga_id, by, "changed my mind"))
        elif state.status is SagaStatus.NEEDS_HUMAN:
            await self._parked(state, roll, by)
        elif state.status is SagaStatus.COMPENSATION_FAILED:
            await self._letters(state, roll, by)
        elif state.status is SagaStatus.COMPENSATED and roll < 0.3:
            made = await self._try("rerun", lambda: o.rerun(saga_id, by, "try again"))
            self._adopt(made)
        elif state.status.terminal and roll < 0.5:
            edit = Edit("0", "amount", str(Decimal(self.rng.randint(1, 600))))
            made = await self._try("fork", lambda: o.fork(saga_id, [edit], by, "other amount"))
            self._adopt(made)
        if self.rng.random() < 0.05:
            await self._bulk(by)

    async def decide_what_waits(self) -> None:
        """Approve or reject every approval still pending (once the world has calmed down:
        a request for a person may be open for a day)."""
        waiting = await self.orch.store.list_sagas(SagaStatus.AWAITING_APPROVAL, limit=1000)
        for saga_id in sorted(found.saga_id for found in waiting):
            await self._decide(saga_id, approve=self.rng.random() < 0.7)

    async def _decide(self, saga_id: str, *, approve: bool) -> None:
        o, by = self.orch, self.who()
        if not approve:
            await self._try("reject", lambda: o.reject(saga_id, by, "no", run=False))
            return
        await self._try("approve", lambda: o.approve(saga_id, by, "ok", run=False))
        # a second person, where two must approve (or where the first was refused)
        await self._try("approve", lambda: o.approve(saga_id, "carl", "ok", run=False))

    def _adopt(self, made: Any) -> None:
        if isinstance(made, SagaState) and made.saga_id not in self.sagas:
            self.sagas.append(made.saga_id)

    async def _parked(self, state: SagaState, roll: float, by: str) -> None:
        o, saga_id = self.orch, state.saga_id
        if roll < 0.3:
            await self._try("resume", lambda: o.resume(saga_id, by, "fixed"))
        elif roll < 0.75:
            await self._resume_from(saga_id, len(state.steps), by)
        else:
            resolved = await self._try("resolve", lambda: o.resolve(saga_id, by, "by hand"))
            if resolved:  # the person settled it outside: what went back goes all the way
                back = any(r.undo_status is not UndoStatus.NONE for r in state.steps)
                for r in state.steps:
                    self.world.by_hand(f"{saga_id}:{r.index}", r.name, undo=back)

    async def _resume_from(self, saga_id: str, steps: int, by: str) -> None:
        """Resume from one step after another, in a random order, until one is taken (a
        refusal records nothing, and says what the person should pick instead)."""
        for step in self.rng.sample(range(steps), steps):
            resume = functools.partial(self.orch.resume, saga_id, by, "fixed", from_step=str(step))
            if await self._try("resume from a step", resume):
                await self._settled_by_hand(saga_id)
                return

    async def _settled_by_hand(self, saga_id: str) -> None:
        """The steps the person declared settled when resuming from a step: done by hand."""
        stored = await self.orch.store.load(saga_id)
        events = await self.orch.store.events(saga_id)
        resumed = [e for e in events if e.type is EventType.SAGA_RESUMED]
        if stored is None or not resumed:
            return
        for index in resumed[-1].data.get("settled", ()):
            name = stored.state.steps[index].name
            self.world.by_hand(f"{saga_id}:{index}", name, undo=False)

    async def _letters(self, state: SagaState, roll: float, by: str) -> None:
        o = self.orch
        letters = await o.store.dead_letters("open")
        mine = [d for d in letters if d.saga_id == state.saga_id]
        if not mine:
            return
        letter = self.rng.choice(mine)
        if roll < 0.4:
            await self._try("retry a dead letter", lambda: o.dead_letter_due(letter.id, by))
        elif roll < 0.6:
            await self._try("retry a dead letter now", lambda: o.retry_dead_letter(letter.id))
        else:
            done = await self._try(
                "resolve a dead letter", lambda: o.resolve_dead_letter(letter.id, by, "by hand")
            )
            if done:  # the person moved it back outside
                self.world.by_hand(f"{letter.saga_id}:{letter.step}", letter.step_name, undo=True)

    async def _bulk(self, by: str) -> None:
        act = self.rng.choice(list(bulk.Act))
        status = {
            bulk.Act.ABORT: SagaStatus.RUNNING,
            bulk.Act.RERUN: SagaStatus.COMPENSATED,
            bulk.Act.RETRY_DEAD_LETTERS: SagaStatus.COMPENSATION_FAILED,
        }[act]

        async def bulk_act() -> Any:
            chosen = await bulk.select(self.orch.store, SagaFilter(status=(status,)))
            return await bulk.act(self.orch, act, chosen, by, "in bulk")

        results = await self._try(f"bulk {act.value}", bulk_act)
        for result in results if isinstance(results, list) else ():
            made = getattr(result, "rerun", None)
            if isinstance(made, str) and made not in self.sagas:
                self.sagas.append(made)
