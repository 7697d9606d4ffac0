"""Slow clients are cut off: a deadline on the request's headers and on its body.

* ``BodyTimeouts`` (pure ASGI middleware, wrapping ``receive``): each part of a request body
  must arrive within ``idle`` seconds of the last, and the whole body within ``idle`` plus
  one second per ``min_rate`` bytes received so far, so a client trickling a byte at a time
  falls behind. Past either the answer is 408 ``body_timeout`` and the connection is closed.
* ``timed_h11(headers)``: uvicorn's h11 protocol with a deadline on the request line and
  headers: a connection that has not sent a whole head within ``headers`` seconds of opening
  (or of its previous answer) is closed. Uvicorn itself only times out a connection that is
  idle after an answer (``timeout_keep_alive``); any byte starts a wait without end.

``pivotal serve`` sets both (``--header-timeout``, ``--body-timeout``, ``--min-body-rate``),
with uvicorn's ``limit_concurrency`` (503 past that many connections and requests) and
``h11_max_incomplete_event_size`` (the most a head may buffer)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pivotal.server.guard import answer

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol

BODY_TIMEOUT = 15.0
MIN_BODY_RATE = 1024.0  # bytes per second
HEADER_TIMEOUT = 10.0


class BodyTooSlow(Exception):
    """The client did not send its body in time."""


class BodyTimeouts:
    def __init__(
        self, app: ASGIApp, idle: float = BODY_TIMEOUT, min_rate: float = MIN_BODY_RATE
    ) -> None:
        if idle <= 0 or min_rate <= 0:
            raise ValueError("body timeouts must be positive")
        self.app = app
        self.idle = idle
        self.min_rate = min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        received = 0
        done = False
        answered = False

        async def timed() -> Message:
            nonlocal received, done
            if done:  # after the body: the app waits for a disconnect, with no deadline
                return await receive()
            budget = started + self.idle + received / self.min_rate - loop.time()
            try:
                async with asyncio.timeout(max(0.0, min(self.idle, budget))):
                    message = await receive()
            except TimeoutError:
                raise BodyTooSlow from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                done = not message.get("more_body", False)
            else:
                done = True
            return message

        async def sending(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        try:
            await self.app(scope, timed, sending)
        except BodyTooSlow:
            if not answered:
                await answer(
                    send,
                    408,
                    "body_timeout",
                    f"the request body came too slowly (at least {self.min_rate:g} bytes a "
                    f"second, no pause over {self.idle:g} s)",
                )


def timed_h11(headers: float = HEADER_TIMEOUT) -> type[H11Protocol]:
    """Uvicorn's h11 protocol, closing a connection whose request head takes longer than
    ``headers`` seconds."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if headers <= 0:
        raise ValueError("the header timeout must be positive")

    class TimedH11Protocol(H11Protocol):
        header_timeout = headers

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._head_cycle: object = None

        def _arm(self) -> None:
            self._disarm()
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_seen(self) -> None:
            if self._head_timer is not None and self.cycle is not self._head_cycle:
                self._disarm()

        def _head_late(self) -> None:
            self._head_timer = None
            if self.cycle is self._head_cycle and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._head_seen()

        def on_response_complete(self) -> None:
            self._arm()
            super().on_response_complete()
            self._head_seen()
            if self.transport.is_closing():
                self._disarm()

    return TimedH11Protocol
