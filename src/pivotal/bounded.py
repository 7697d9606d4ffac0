"""The app's own code on the engine's path (its trusted facts, the steps' preconditions,
its rules), run on a thread of its own and bounded in time, so that a callback that hangs
never stalls the event loop of a server or a worker."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

# The app's facts callback is user code on the engine's path: it runs on a thread of its
# own, a daemon (one that never answers must not keep the process from exiting), and at
# most a few at once, so that callbacks that hang cannot take every thread.
_FACTS_THREADS = threading.BoundedSemaphore(4)


T = TypeVar("T")


class FactsUnanswered(Exception):
    """The facts callback did not answer in time, or no thread was free to ask it."""


async def on_facts_thread(ask: Callable[[], T], limit: float) -> T:
    """``ask()`` (the app's code: its facts, a precondition) on a facts thread, bounded by
    ``limit`` seconds in all, waiting for a free thread included; ``FactsUnanswered`` when
    it did not answer in time, or when earlier calls kept every thread that long. What
    ``ask`` raises is raised here. The thread of a call given up on is left to end on its
    own."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    pause = 0.001
    while not _FACTS_THREADS.acquire(blocking=False):  # each busy thread ends on its own
        left = deadline - loop.time()
        if left <= 0:
            raise FactsUnanswered(
                f"earlier calls of the trusted facts have not answered: no thread was free "
                f"within {limit:g}s"
            )
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
    answer: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            found: T = ask()
        except BaseException as exc:  # given to the caller, never lost with the thread
            outcome: Callable[[], None] = functools.partial(_failed, answer, exc)
        else:
            outcome = functools.partial(_answer, answer, found)
        finally:
            _FACTS_THREADS.release()
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(outcome)

    threading.Thread(target=run, name="pivotal-facts", daemon=True).start()
    try:
        return await asyncio.wait_for(answer, max(deadline - loop.time(), 0.0))
    except TimeoutError:
        raise FactsUnanswered(f"the trusted facts did not answer within {limit:g}s") from None


def _answer(answer: asyncio.Future[T], found: T) -> None:
    if not answer.done():  # not given up on
        answer.set_result(found)


def _failed(answer: asyncio.Future[Any], error: BaseException) -> None:
    if not answer.done():
        answer.set_exception(error)
