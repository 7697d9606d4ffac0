"""A loopback server that speaks the chat-completions wire protocol and replays recorded
replies in order; and a look at the events table's provenance column."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pivotal.store.sql import SQLStore

RECORDED: dict[str, Any] = json.loads((Path(__file__).parent / "recorded_replies.json").read_text())


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a JSON value, or a str sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def recorded(name: str, *, delay: float = 0.0) -> Reply:
    item = RECORDED[name]
    return Reply(item["status"], item["body"], dict(item.get("headers", {})), delay)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class FakeChatServer:
    """Answers POST /v1/chat/completions with the next queued reply; records every request."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.seen: list[Seen] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                server.seen.append(Seen(self.path, dict(self.headers.items()), body))
                reply = server.replies.popleft() if server.replies else Reply(599, "no reply")
                if self.path != "/v1/chat/completions":
                    reply = Reply(404, {"error": {"message": f"no route {self.path}"}})
                time.sleep(reply.delay)
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = payload.encode()
                try:
                    self.send_response(reply.status)
                    kind = "text/plain" if isinstance(reply.body, str) else "application/json"
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> FakeChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


async def event_provenance_refs(store: SQLStore, saga_id: str) -> list[str]:
    """The provenance reference on each of the saga's rows in the events table, in order."""
    rows = await store._fetch(
        "SELECT provenance_ref FROM events WHERE saga_id = ? ORDER BY seq", (saga_id,)
    )
    return [r[0] for r in rows]
