# examples/first_catalogue/fakeshop.py
"""Stand-ins for the shop's order system, a payment provider and a mailer. Like real ones,
they apply a call once per idempotency key (a repeated key returns the first reply), and they
keep their state in a SQLite file, so that every process (submit, worker, approve) sees the
same world. Two orders exist: 4471 (180.00, ana@example.com) and 9 (120.00, whose card
issuer declines every capture)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pivotal import Permanent

Reply = dict[str, Any]


class FakeServices:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA busy_timeout = 10000")
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS holds (key TEXT PRIMARY KEY, order_id TEXT NOT NULL,"
            " amount TEXT NOT NULL, status TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS captures (key TEXT PRIMARY KEY, hold TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS emails (key TEXT PRIMARY KEY, recipient TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, amount TEXT NOT NULL,"
            " email TEXT NOT NULL, status TEXT NOT NULL, card TEXT NOT NULL);"
            "INSERT OR IGNORE INTO orders VALUES"
            " ('4471', '180.00', 'ana@example.com', 'open', 'ok'),"
            " ('9', '120.00', 'ben@example.com', 'open', 'declines');"
        )

    def order(self, order_id: str) -> dict[str, Any]:
        """What the order system knows of an order (nothing when there is no such order)."""
        row = self.db.execute(
            "SELECT amount, email, status FROM orders WHERE order_id = ?", (order_id,)
        ).fetchone()
        return {} if row is None else {"amount": row[0], "email": row[1], "status": row[2]}

    def hold(self, order_id: str, amount: Decimal, key: str) -> Reply:
        def apply() -> Reply:
            self.db.execute(
                "INSERT INTO holds VALUES (?, ?, ?, 'held')", (key, order_id, str(amount))
            )
            return {"hold": key, "amount": str(amount)}

        return self._once(key, apply)

    def release(self, hold_key: str, key: str) -> Reply:
        """Release the hold made with ``hold_key``; no such hold means nothing to release."""

        def apply() -> Reply:
            found = self.db.execute(
                "UPDATE holds SET status = 'released' WHERE key = ? AND status = 'held'",
                (hold_key,),
            ).rowcount
            return {"released": hold_key if found else None}

        return self._once(key, apply)

    def capture(self, order_id: str, amount: Decimal, key: str) -> Reply:
        def apply() -> Reply:
            row = self.db.execute(
                "SELECT key, amount FROM holds WHERE order_id = ? AND status = 'held'",
                (order_id,),
            ).fetchone()
            if row is None or Decimal(row[1]) < amount:
                raise Permanent(f"no hold of {amount} for order {order_id}")
            card = self.db.execute("SELECT card FROM orders WHERE order_id = ?", (order_id,))
            if card.fetchone() == ("declines",):
                raise Permanent(f"the card issuer declined the capture for order {order_id}")
            self.db.execute("UPDATE holds SET status = 'captured' WHERE key = ?", (row[0],))
            self.db.execute("UPDATE orders SET status = 'paid' WHERE order_id = ?", (order_id,))
            self.db.execute("INSERT INTO captures VALUES (?, ?)", (key, row[0]))
            return {"captured": row[0], "amount": str(amount)}

        return self._once(key, apply)

    def email(self, recipient: str, key: str) -> Reply:
        def apply() -> Reply:
            self.db.execute("INSERT INTO emails VALUES (?, ?)", (key, recipient))
            return {"sent_to": recipient}

        return self._once(key, apply)

    def find(self, key: str) -> Reply | None:
        """The reply to the call made with ``key``, or None when it took no effect."""
        row = self.db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def _once(self, key: str, apply: Callable[[], Reply]) -> Reply:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            reply: Reply = json.loads(row[0]) if row else apply()
            if row is None:
                self.db.execute("INSERT INTO replies VALUES (?, ?)", (key, json.dumps(reply)))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return reply
