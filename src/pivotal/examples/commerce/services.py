"""Simulated inventory, payments, shipping and email services.

They keep their own state in a SQLite file separate from the ledger, and honour
idempotency keys: a repeated key returns the first result and never repeats the effect.
Every call is logged, so tests can count calls and effects per key.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from pivotal.errors import Permanent, Transient
from pivotal.examples.commerce.faults import Fault, Faults

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT NOT NULL, key TEXT NOT NULL,
    fault TEXT, at REAL NOT NULL, ended INTEGER, pid INTEGER);
CREATE TABLE IF NOT EXISTS effects (
    key TEXT PRIMARY KEY, op TEXT NOT NULL, result TEXT NOT NULL, at REAL NOT NULL,
    expired INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS stock (
    sku TEXT NOT NULL, warehouse TEXT NOT NULL, available INTEGER NOT NULL,
    PRIMARY KEY (sku, warehouse));
CREATE TABLE IF NOT EXISTS resold (
    order_id TEXT NOT NULL, sku TEXT NOT NULL, quantity INTEGER NOT NULL,
    PRIMARY KEY (order_id, sku));
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, tier TEXT NOT NULL,
    status TEXT NOT NULL, details TEXT);
CREATE TABLE IF NOT EXISTS reservations (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, order_id TEXT NOT NULL, sku TEXT NOT NULL,
    warehouse TEXT NOT NULL, quantity INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS payments (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, order_id TEXT NOT NULL, kind TEXT NOT NULL,
    amount TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shipments (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, order_id TEXT NOT NULL, warehouse TEXT NOT NULL,
    status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS emails (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, order_id TEXT NOT NULL, recipient TEXT NOT NULL,
    template TEXT NOT NULL);
"""

Result = dict[str, Any]


def raised(fault: Fault, op: str) -> Exception:
    """The exception a call of ``op`` meeting ``fault`` raises."""
    if fault is Fault.TRANSIENT:
        return Transient(f"{op}: service unavailable, try again")
    if fault is Fault.PERMANENT:
        return Permanent(f"{op}: refused by the provider")
    if fault is Fault.TIMEOUT_BEFORE_EFFECT:
        return TimeoutError(f"{op}: no reply")
    if fault is Fault.TIMEOUT_AFTER_EFFECT:
        return TimeoutError(f"{op}: reply lost after the effect")
    if fault is Fault.ERROR_BEFORE_EFFECT:
        return RuntimeError(f"{op}: the client failed before sending the request")
    if fault is Fault.KEY_ERROR_AFTER_EFFECT:
        return KeyError(f"{op}: the reply has no 'id' field")
    if fault is Fault.PARSE_ERROR_AFTER_EFFECT:
        return json.JSONDecodeError(f"{op}: the reply is not JSON", "<html>", 0)
    if fault is Fault.RUNTIME_ERROR_AFTER_EFFECT:
        return RuntimeError(f"{op}: the client crashed reading the reply")
    return ConnectionResetError(f"{op}: connection reset after the effect")


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class CommerceServices:
    """All four simulated services over one SQLite file."""

    def __init__(self, path: str | Path = ":memory:", faults: Faults | None = None) -> None:
        self.path = str(path)
        self.faults = faults or Faults()
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA busy_timeout = 10000")
        if self.path != ":memory:":
            self.db.execute("PRAGMA journal_mode = WAL")
        self.db.executescript(_SCHEMA)
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(orders)")}
        if "details" not in columns:  # a state file from before order details
            self.db.execute("ALTER TABLE orders ADD COLUMN details TEXT")
        calls = {r[1] for r in self.db.execute("PRAGMA table_info(calls)")}
        if "ended" not in calls:  # a state file from before call spans
            self.db.execute("ALTER TABLE calls ADD COLUMN ended INTEGER")
        if "pid" not in calls:  # a state file from before calls named their process
            self.db.execute("ALTER TABLE calls ADD COLUMN pid INTEGER")
        effects = {r[1] for r in self.db.execute("PRAGMA table_info(effects)")}
        if "expired" not in effects:  # a state file from before idempotency records expired
            self.db.execute("ALTER TABLE effects ADD COLUMN expired INTEGER NOT NULL DEFAULT 0")
        # one connection for every thread (a precondition's facts thread, the providers'
        # calls): each transaction on it holds this lock, so none begins inside another's
        self.lock = threading.RLock()
        self.faults.bind(self.db, self.lock)
        self._owner = threading.current_thread()
        self._readers = threading.local()  # a connection per other thread (a file's state)

    def close(self) -> None:
        self.db.close()

    # -- set-up -------------------------------------------------------------------------

    def stock(self, sku: str, warehouse: str, available: int) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO stock (sku, warehouse, available) VALUES (?, ?, ?)",
            (sku, warehouse, available),
        )

    def order(self, order_id: str, customer: str, tier: str = "standard", **details: Any) -> None:
        """Open (or reopen) an order; ``details`` are facts such as amount, sku, warehouse."""
        self.db.execute(
            "INSERT INTO orders (order_id, customer, tier, status, details) "
            "VALUES (?, ?, ?, 'open', ?) ON CONFLICT (order_id) DO UPDATE SET "
            "customer = excluded.customer, tier = excluded.tier, status = 'open', "
            "details = COALESCE(excluded.details, orders.details)",
            (order_id, customer, tier, json.dumps(details) if details else None),
        )

    def order_facts(self, order_id: str) -> dict[str, Any]:
        """What the order system knows about an order: its customer, tier, status, currency
        (EUR unless its details say), lines (``[{sku, quantity}]``; an order whose details
        name one ``sku`` has that line, of ``quantity`` or 1) and its other details."""
        row = self._order_row(order_id)
        if row is None:
            return {}
        details: dict[str, Any] = json.loads(row[3] or "{}")
        lines = details.get("lines")
        if lines is None and "sku" in details:
            lines = [{"sku": details["sku"], "quantity": details.get("quantity", 1)}]
        facts = {"customer": row[0], "customer_tier": row[1], "order_status": row[2]}
        return facts | {"currency": "EUR"} | details | {"lines": lines or []}

    def _order_row(self, order_id: str) -> Any:
        """The order's row, read on a connection of the calling thread's own: the order
        system is asked for facts from another thread than the providers' calls (Pivotal
        bounds the facts callback on a thread), and one SQLite connection must not serve
        both at once (another process's write between this read's start and a write of
        the same connection fails it at once). An in-memory state has one connection, and
        no other process."""
        query = "SELECT customer, tier, status, details FROM orders WHERE order_id = ?"
        if self.path == ":memory:" or threading.current_thread() is self._owner:
            return self.db.execute(query, (order_id,)).fetchone()
        reader = getattr(self._readers, "db", None)
        if reader is None:
            reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            reader.execute("PRAGMA busy_timeout = 10000")
            self._readers.db = reader
        return reader.execute(query, (order_id,)).fetchone()

    def set_order_status(self, order_id: str, status: str) -> None:
        self.db.execute("UPDATE orders SET status = ? WHERE order_id = ?", (status, order_id))

    # -- the idempotent core ------------------------------------------------------------

    def _effect(self, op: str, key: str, apply: Callable[[sqlite3.Connection], Result]) -> Result:
        fault = self.faults.take(op)
        call = self.db.execute(
            "INSERT INTO calls (op, key, fault, at, pid) VALUES (?, ?, ?, ?, ?)",
            (op, key, fault.value if fault else None, time.time(), os.getpid()),
        ).lastrowid
        try:
            if fault is not None and not fault.after_effect:
                raise raised(fault, op)
            result = self._apply(op, key, apply)
            if fault is not None:
                raise raised(fault, op)
            return result
        finally:
            self._ended(call)

    def _apply(self, op: str, key: str, apply: Callable[[sqlite3.Connection], Result]) -> Result:
        with self.lock:
            return self._apply_locked(op, key, apply)

    def _apply_locked(
        self, op: str, key: str, apply: Callable[[sqlite3.Connection], Result]
    ) -> Result:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute(
                "SELECT result, expired FROM effects WHERE key = ?", (key,)
            ).fetchone()
            if row is not None and not row[1]:
                result: Result = json.loads(row[0])
            else:  # a new key, or one whose record has expired: the effect is made (again)
                result = apply(self.db)
                self.db.execute(
                    "INSERT INTO effects (key, op, result, at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET result = excluded.result, "
                    "at = excluded.at, expired = 0",
                    (key, op, json.dumps(result), time.time()),
                )
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return result

    def _ended(self, call: int | None) -> None:
        """Close the call's span: ``ended`` is the newest call id when it returned, so a call
        of the same key with an id in ``(id, ended]`` ran while this one was in flight."""
        self.db.execute(
            "UPDATE calls SET ended = (SELECT MAX(id) FROM calls) WHERE id = ?", (call,)
        )

    def expire_keys(self) -> None:
        """Forget every idempotency record made so far, as a provider does after its
        retention (about a day): a call repeated with one of those keys makes its effect
        again. Lookups still find what was made (they search the records themselves)."""
        self.db.execute("UPDATE effects SET expired = 1")

    def find(self, key: str) -> Result | None:
        """The result of the effect made with ``key``, or ``None`` (for lookups).

        A fault scheduled for the ``find`` operation makes it raise; it never lies."""
        fault = self.faults.take("find")
        if fault is not None:
            raise raised(fault, "find")
        row = self.db.execute("SELECT result FROM effects WHERE key = ?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    # -- inventory ----------------------------------------------------------------------

    def sku_known(self, sku: str, warehouse: str) -> bool:
        return (
            self.db.execute(
                "SELECT 1 FROM stock WHERE sku = ? AND warehouse = ?", (sku, warehouse)
            ).fetchone()
            is not None
        )

    def available(self, sku: str, warehouse: str) -> int:
        row = self.db.execute(
            "SELECT available FROM stock WHERE sku = ? AND warehouse = ?", (sku, warehouse)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def reserve(self, order_id: str, sku: str, quantity: int, warehouse: str, key: str) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            cur = db.execute(
                "UPDATE stock SET available = available - ? "
                "WHERE sku = ? AND warehouse = ? AND available >= ?",
                (quantity, sku, warehouse, quantity),
            )
            if cur.rowcount != 1:
                raise Permanent(f"out of stock: {quantity} x {sku} at warehouse {warehouse}")
            rid = _id("res")
            db.execute(
                "INSERT INTO reservations VALUES (?, ?, ?, ?, ?, ?, 'active')",
                (rid, key, order_id, sku, warehouse, quantity),
            )
            return {"reservation_id": rid}

        return self._effect("reserve", key, apply)

    def resell(self, order_id: str, sku: str, quantity: int) -> None:
        """The warehouse handed ``quantity`` units held for ``order_id`` to another buyer
        (a counter sale that ignored the reservation): releasing that reservation can put
        only the rest back on the shelf."""
        self.db.execute(
            "INSERT OR REPLACE INTO resold (order_id, sku, quantity) VALUES (?, ?, ?)",
            (order_id, sku, quantity),
        )

    def lapse_holds(self, order_id: str) -> None:
        """The providers let the order's holds lapse, as they do after their expiry: the
        warehouse puts the units of its active reservations back on the shelf and the card
        network drops its open authorisations. Releasing or voiding them later finds
        nothing; capturing them fails."""
        with self.lock:
            self._lapse_locked(order_id)

    def _lapse_locked(self, order_id: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        held = self.db.execute(
            "SELECT id, sku, warehouse, quantity FROM reservations "
            "WHERE order_id = ? AND status = 'active'",
            (order_id,),
        ).fetchall()
        for rid, sku, warehouse, quantity in held:
            self.db.execute("UPDATE reservations SET status = 'lapsed' WHERE id = ?", (rid,))
            self.db.execute(
                "UPDATE stock SET available = available + ? WHERE sku = ? AND warehouse = ?",
                (quantity, sku, warehouse),
            )
        self.db.execute(
            "UPDATE payments SET status = 'lapsed' WHERE order_id = ? "
            "AND kind = 'authorization' AND status = 'authorized'",
            (order_id,),
        )
        self.db.execute("COMMIT")

    def release(self, reserved_with: str, key: str) -> Result:
        """Release the reservation made with key ``reserved_with``; not found is done.
        Units of it already re-sold cannot return to stock: the result then says how many
        did (``returned`` of ``quantity``)."""

        def apply(db: sqlite3.Connection) -> Result:
            row = db.execute(
                "SELECT id, sku, warehouse, quantity, order_id FROM reservations "
                "WHERE key = ? AND status = 'active'",
                (reserved_with,),
            ).fetchone()
            if row is None:
                return {"released": None}
            gone = db.execute(
                "SELECT quantity FROM resold WHERE order_id = ? AND sku = ?", (row[4], row[1])
            ).fetchone()
            resold = min(int(row[3]), int(gone[0])) if gone else 0
            db.execute("UPDATE reservations SET status = 'released' WHERE id = ?", (row[0],))
            db.execute(
                "UPDATE stock SET available = available + ? WHERE sku = ? AND warehouse = ?",
                (row[3] - resold, row[1], row[2]),
            )
            if resold:
                return {"released": row[0], "returned": row[3] - resold, "quantity": row[3]}
            return {"released": row[0]}

        return self._effect("release", key, apply)

    # -- payments -----------------------------------------------------------------------

    def _pay(
        self, op: str, kind: str, status: str, order_id: str, amount: Decimal, key: str
    ) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            pid = _id(kind[:2])
            db.execute(
                "INSERT INTO payments VALUES (?, ?, ?, ?, ?, ?)",
                (pid, key, order_id, kind, str(amount), status),
            )
            return {f"{kind}_id": pid, "amount": str(amount)}

        return self._effect(op, key, apply)

    def charge(self, order_id: str, amount: Decimal, key: str) -> Result:
        """Charge the order's customer; the order is then paid (a refund reopens it)."""

        def apply(db: sqlite3.Connection) -> Result:
            pid = _id("ch")
            db.execute(
                "INSERT INTO payments VALUES (?, ?, ?, 'charge', ?, 'charged')",
                (pid, key, order_id, str(amount)),
            )
            db.execute(
                "UPDATE orders SET status = 'paid' WHERE order_id = ? AND status = 'open'",
                (order_id,),
            )
            return {"charge_id": pid, "amount": str(amount)}

        return self._effect("charge", key, apply)

    def authorize(self, order_id: str, amount: Decimal, key: str) -> Result:
        return self._pay("authorize", "authorization", "authorized", order_id, amount, key)

    def _reverse(
        self, op: str, made_with: str, from_status: str, to_status: str, key: str
    ) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            row = db.execute(
                "SELECT id FROM payments WHERE key = ? AND status = ?", (made_with, from_status)
            ).fetchone()
            if row is None:
                return {to_status: None}
            db.execute("UPDATE payments SET status = ? WHERE id = ?", (to_status, row[0]))
            return {to_status: row[0]}

        return self._effect(op, key, apply)

    def refund(self, charged_with: str, key: str) -> Result:
        """Refund the charge made with ``charged_with``; its order is open again."""

        def apply(db: sqlite3.Connection) -> Result:
            row = db.execute(
                "SELECT id, order_id FROM payments WHERE key = ? AND status = 'charged'",
                (charged_with,),
            ).fetchone()
            if row is None:
                return {"refunded": None}
            db.execute("UPDATE payments SET status = 'refunded' WHERE id = ?", (row[0],))
            db.execute(
                "UPDATE orders SET status = 'open' WHERE order_id = ? AND status = 'paid'",
                (row[1],),
            )
            return {"refunded": row[0]}

        return self._effect("refund", key, apply)

    def void(self, authorized_with: str, key: str) -> Result:
        return self._reverse("void", authorized_with, "authorized", "voided", key)

    def capture(self, order_id: str, amount: Decimal, key: str) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            row = db.execute(
                "SELECT id, amount FROM payments WHERE order_id = ? AND kind = 'authorization' "
                "AND status = 'authorized' ORDER BY rowid DESC LIMIT 1",
                (order_id,),
            ).fetchone()
            if row is None:
                raise Permanent(f"no open authorization for order {order_id}")
            if Decimal(row[1]) < amount:
                raise Permanent(f"capture of {amount} exceeds the authorized {row[1]}")
            db.execute("UPDATE payments SET status = 'captured' WHERE id = ?", (row[0],))
            db.execute("UPDATE orders SET status = 'paid' WHERE order_id = ?", (order_id,))
            cid = _id("cp")
            db.execute(
                "INSERT INTO payments VALUES (?, ?, ?, 'capture', ?, 'captured')",
                (cid, key, order_id, str(amount)),
            )
            return {"capture_id": cid, "authorization_id": row[0], "amount": str(amount)}

        return self._effect("capture", key, apply)

    # -- orders -------------------------------------------------------------------------

    def order_status(self, order_id: str) -> str | None:
        row = self.db.execute(
            "SELECT status FROM orders WHERE order_id = ?", (order_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def tier(self, order_id: str) -> str | None:
        row = self.db.execute("SELECT tier FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        return None if row is None else str(row[0])

    # -- shipping and email -------------------------------------------------------------

    def ship(self, order_id: str, warehouse: str, key: str) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            sid = _id("shp")
            db.execute(
                "INSERT INTO shipments VALUES (?, ?, ?, ?, 'created')",
                (sid, key, order_id, warehouse),
            )
            return {"shipment_id": sid}

        return self._effect("ship", key, apply)

    def cancel_shipment(self, shipped_with: str, key: str) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            row = db.execute(
                "SELECT id FROM shipments WHERE key = ? AND status = 'created'", (shipped_with,)
            ).fetchone()
            if row is None:
                return {"cancelled": None}
            db.execute("UPDATE shipments SET status = 'cancelled' WHERE id = ?", (row[0],))
            return {"cancelled": row[0]}

        return self._effect("cancel_shipment", key, apply)

    def email(self, order_id: str, recipient: str, template: str, key: str) -> Result:
        def apply(db: sqlite3.Connection) -> Result:
            eid = _id("eml")
            db.execute(
                "INSERT INTO emails VALUES (?, ?, ?, ?, ?)",
                (eid, key, order_id, recipient, template),
            )
            return {"email_id": eid}

        return self._effect("email", key, apply)

    # -- inspection (tests, invariants, the demo) ----------------------------------------

    def rows(self, table: str, **where: Any) -> list[dict[str, Any]]:
        if table not in {
            "calls",
            "effects",
            "reservations",
            "payments",
            "shipments",
            "emails",
            "stock",
            "orders",
        }:
            raise ValueError(f"no table {table!r}")
        clause = " AND ".join(f"{k} = ?" for k in where)
        cur = self.db.execute(
            f"SELECT * FROM {table}" + (f" WHERE {clause}" if clause else "") + " ORDER BY rowid",
            tuple(where.values()),
        )
        names = [c[0] for c in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def calls(self, op: str | None = None) -> list[dict[str, Any]]:
        return self.rows("calls", op=op) if op else self.rows("calls")

    def call_spans(self) -> list[tuple[str, int, int | None]]:
        """(key, id, ended) of every provider call: see ``_ended``."""
        return [
            (str(k), int(i), None if e is None else int(e))
            for k, i, e in self.db.execute("SELECT key, id, ended FROM calls ORDER BY id")
        ]

    def effects_per_key(self) -> dict[str, int]:
        """How many domain records each idempotency key produced (1 at most when correct)."""
        counts: dict[str, int] = {}
        for table in ("reservations", "payments", "shipments", "emails"):
            for key, n in self.db.execute(f"SELECT key, COUNT(*) FROM {table} GROUP BY key"):
                counts[key] = counts.get(key, 0) + n
        return counts
