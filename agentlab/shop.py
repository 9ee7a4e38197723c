"""An example toolset on a real database: a small shop in SQLite.

Customers, orders, shipments and refunds, created from ``agentlab/data/shop.sql``
the first time a database file is opened. The tools are the kinds an agent
meets in practice, and each one shows one lesson of the loop:

* reads (``get_order``, ``search_orders``, ``get_customer``) run concurrently;
* writes (``update_order_status``, ``add_note``) run alone; ``add_note`` does a
  read-modify-write on purpose, so two notes written *concurrently* would lose
  one (the race the scheduler prevents);
* ``refund_order`` needs a role this agent does not have: a
  :class:`~agentlab.PermissionDenied`, fatal by default;
* ``carrier_status`` asks a carrier's API (:class:`CarrierAPI`), which can be
  made to fail with 503 a set number of times, or to hang.

Every :class:`Shop` owns its state (database file, carrier), so scenarios and
tests never share flakiness or writes. Each tool call opens its own SQLite
connection: tools run on worker threads, and a connection must not cross them.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import weakref
from importlib import resources
from pathlib import Path
from typing import Any, Literal, NoReturn

from ._checks import whole
from .errors import PermissionDenied, RetryableError, ToolError
from .tools import Retry, Tool

Status = Literal["placed", "packed", "shipped", "delivered", "cancelled", "refunded", "on hold"]

REFUND_ROLE = "billing"
"""The role ``refund_order`` (and setting status "refunded") requires."""


def schema_sql() -> str:
    """The SQL that creates and fills a fresh shop database."""
    return resources.files("agentlab").joinpath("data/shop.sql").read_text(encoding="utf-8")


def _check_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
    return float(value)


class CarrierAPI:
    """A stand-in for a carrier's tracking API, with controllable trouble.

    ``fail_first`` calls raise a retryable 503 before the API answers;
    ``hang=True`` makes every call block (until :meth:`release` or
    ``hang_s``), like an upstream that accepts the connection and never
    replies. The counter belongs to this instance, so flakiness is
    per-scenario, never global.
    """

    def __init__(self, *, fail_first: int = 0, hang: bool = False, hang_s: float = 300.0, latency: float = 0.0) -> None:
        whole("fail_first", fail_first, at_least=0)
        self.fail_first = fail_first
        self.hang = bool(hang)
        self.hang_s = _check_seconds("hang_s", hang_s)
        self.latency = _check_seconds("latency", latency)
        self.calls = 0
        self._lock = threading.Lock()
        self._released = threading.Event()

    def release(self) -> None:
        """Let every hanging call return (the abandoned worker threads finish)."""
        self._released.set()

    def status(self, shipment: dict[str, Any]) -> dict[str, Any]:
        """The carrier's view of one shipment: where it is and what happened."""
        with self._lock:
            self.calls += 1
            n = self.calls
        if self.hang:
            self._released.wait(self.hang_s)
            raise ConnectionError(f"{shipment['carrier']} tracking API closed the connection without a reply")
        if self.latency:
            time.sleep(self.latency)
        if n <= self.fail_first:
            raise RetryableError(f"503 Service Unavailable from the {shipment['carrier']} tracking API (call {n})")
        events = (
            [{"date": shipment["shipped_on"], "event": "collected from the warehouse"}]
            if shipment["shipped_on"]
            else []
        )
        if shipment.get("delay_reason"):
            events.append({"date": shipment["promised_on"], "event": f"delayed: {shipment['delay_reason']}"})
        if shipment["delivered_on"]:
            events.append({"date": shipment["delivered_on"], "event": "delivered, signed for at the door"})
        state = (
            "delivered"
            if shipment["delivered_on"]
            else "in transit"
            if shipment["shipped_on"]
            else "awaiting collection"
        )
        return {"tracking": shipment["tracking"], "carrier": shipment["carrier"], "state": state, "events": events}


class Shop:
    """A shop database in SQLite and the tools an agent uses on it.

    Args:
        path: the database file. Created from the shipped SQL when missing;
            ``None`` makes a private temporary file removed by :meth:`close`.
        latency: seconds each read takes (a real service is not instant; the
            parallel-calls lesson needs something to overlap).
        write_latency: seconds between reading and writing back a note, the
            window in which concurrent writers would race.
        role: the agent's role; refunds need ``"billing"``.
        carrier: the carrier API ``carrier_status`` calls.
        transactions: ``add_note`` reads and writes back inside one
            ``BEGIN IMMEDIATE`` transaction, so notes added at once by two runs
            (or processes) on one database file are all kept. ``False`` reads
            and writes in two steps, the race a lesson shows (two notes at once:
            one is lost).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        latency: float = 0.0,
        write_latency: float = 0.0,
        role: str = "support_agent",
        carrier: CarrierAPI | None = None,
        transactions: bool = True,
    ) -> None:
        self.latency = _check_seconds("latency", latency)
        self.write_latency = _check_seconds("write_latency", write_latency)
        if not isinstance(role, str) or not role:
            raise ValueError(f"role must be a non-empty string, got {role!r}")
        if carrier is not None and not isinstance(carrier, CarrierAPI):
            raise TypeError(f"carrier must be a CarrierAPI, got {type(carrier).__name__}")
        self.role = role
        self.transactions = bool(transactions)
        self.carrier = carrier or CarrierAPI()
        if path is None:
            tmp = tempfile.mkdtemp(prefix="agentlab-shop-")
            self._cleanup: weakref.finalize[..., Shop] | None = weakref.finalize(self, shutil.rmtree, tmp, True)
            path = Path(tmp) / "shop.sqlite"
        else:
            self._cleanup = None
        self.path = Path(path)
        if not self.path.exists():
            self._create()

    def __repr__(self) -> str:
        return f"<Shop {self.path} role={self.role!r}>"

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        partial.unlink(missing_ok=True)
        # Built in memory and copied in one transaction: the script's statements each commit, and on
        # a file each commit is a sync to disk (~0.3 s a shop on a busy machine, paid by every run
        # that gets a fresh shop).
        memory = sqlite3.connect(":memory:")
        con = sqlite3.connect(partial)
        try:
            memory.executescript(schema_sql())
            memory.backup(con)
        finally:
            con.close()
            memory.close()
        os.replace(partial, self.path)  # never leave a half-made database behind

    def connect(self) -> sqlite3.Connection:
        """A new connection (one per call: tools run on worker threads)."""
        con = sqlite3.connect(self.path, timeout=30)
        con.row_factory = sqlite3.Row
        return con

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of a read-only query, as dicts."""
        con = self.connect()
        try:
            return [dict(r) for r in con.execute(sql, params)]
        except OverflowError:  # a number beyond SQLite's 64-bit integers: the model's mistake, not a crash
            raise ToolError(
                "A number in the request is too large (ids here are small whole numbers).",
                hint="check the id and call again.",
            ) from None
        finally:
            con.close()

    def write(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        """Run ``(sql, params)`` statements in one transaction (all or nothing)."""
        con = self.connect()
        try:
            with con:
                for sql, params in statements:
                    con.execute(sql, params)
        finally:
            con.close()

    def close(self) -> None:
        """Release hanging carrier calls and remove a temporary database."""
        self.carrier.release()
        if self._cleanup is not None:
            self._cleanup()

    # ------------------------------------------------------------- reads
    def _pause(self) -> None:
        if self.latency:
            time.sleep(self.latency)

    def _order_or_hint(self, order_id: int) -> dict[str, Any]:
        rows = self.query("SELECT * FROM orders WHERE id = ?", (order_id,)) if _fits(order_id) else []
        if rows:
            return rows[0]
        self._no_order(order_id)

    def _no_order(self, order_id: int) -> NoReturn:
        lo, hi = self.query("SELECT min(id) AS lo, max(id) AS hi FROM orders")[0].values()
        near = _digit_swaps(order_id, {r["id"] for r in self.query("SELECT id FROM orders")})
        guess = f" An order with the same digits exists: {', '.join(map(str, near))}." if near else ""
        shown = order_id if _fits(order_id) else "with an id that large"
        raise ToolError(
            f"No order {shown}. Order ids run from {lo} to {hi}.{guess}",
            hint="search_orders(customer_id=...) lists a customer's orders; then get_order on the right id.",
        )

    def get_order(self, order_id: int) -> dict[str, Any]:
        """One order: items, status, total, notes and its shipment (the ``get_order`` tool)."""
        order = self._order_or_hint(order_id)
        self._pause()
        ship = self.query(
            "SELECT carrier, tracking, promised_on, shipped_on, delivered_on, delay_reason FROM shipments WHERE "
            "order_id = ?",
            (order_id,),
        )
        order["notes"] = [n for n in order["notes"].split("\n") if n]
        order["shipment"] = ship[0] if ship else None
        return order

    def search_orders(
        self,
        customer_id: int | None = None,
        status: str | None = None,
        text: str | None = None,
        page: int = 1,
        page_size: int = 20,
    ) -> dict[str, Any]:
        """Orders matching a customer, status or text (the ``search_orders`` tool)."""
        if page < 1:
            raise ToolError(f"page must be 1 or more, got {page}.", hint="start at page=1.")
        if not 1 <= page_size <= 100:
            raise ToolError(f"page_size must be between 1 and 100, got {page_size}.", hint="use page_size=20.")
        where: list[str] = []
        params: list[Any] = []
        if customer_id is not None:
            where.append("customer_id = ?")
            params.append(customer_id)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if text:
            # The model's text is matched literally: its % and _ are not wildcards.
            where.append("(items LIKE ? ESCAPE '\\' OR notes LIKE ? ESCAPE '\\')")
            literal = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            params += [literal, literal]
        clause = " WHERE " + " AND ".join(where) if where else ""
        total = self.query(f"SELECT count(*) AS n FROM orders{clause}", tuple(params))[0]["n"]
        rows = self.query(
            f"SELECT id, customer_id, placed_at, status, total, items FROM orders{clause} ORDER BY id LIMIT ? OFFSET ?",
            (*params, page_size, (page - 1) * page_size),
        )
        self._pause()
        pages = max(1, -(-total // page_size))
        return {"page": page, "pages": pages, "total": total, "orders": rows}

    def get_customer(self, customer_id: int) -> dict[str, Any]:
        """One customer's record (the ``get_customer`` tool)."""
        rows = self.query("SELECT * FROM customers WHERE id = ?", (customer_id,)) if _fits(customer_id) else []
        if not rows:
            n = self.query("SELECT count(*) AS n FROM customers")[0]["n"]
            raise ToolError(
                f"No customer {customer_id}. Customer ids run from 1 to {n}.",
                hint="get_order shows an order's customer_id.",
            )
        self._pause()
        customer = rows[0]
        customer["orders"] = self.query("SELECT count(*) AS n FROM orders WHERE customer_id = ?", (customer_id,))[0][
            "n"
        ]
        return customer

    def carrier_status(self, tracking: str) -> dict[str, Any]:
        """The carrier's tracking events for a shipment (the ``carrier_status`` tool)."""
        rows = self.query("SELECT * FROM shipments WHERE tracking = ?", (tracking,))
        if not rows:
            raise ToolError(
                f"No shipment with tracking number {tracking!r}.", hint="get_order shows an order's tracking number."
            )
        return self.carrier.status(rows[0])

    # ------------------------------------------------------------ writes
    def update_order_status(self, order_id: int, status: Status) -> dict[str, Any]:
        """Set an order's status, a write (the ``update_order_status`` tool)."""
        if status == "refunded" and self.role != REFUND_ROLE:
            raise PermissionDenied(
                f"setting an order to 'refunded' needs role {REFUND_ROLE!r}; this agent has role {self.role!r}"
            )
        before = self._order_or_hint(order_id)["status"]
        self.write(("UPDATE orders SET status = ? WHERE id = ?", (status, order_id)))
        return {"order_id": order_id, "status": status, "was": before}

    def add_note(self, order_id: int, note: str) -> dict[str, Any]:
        """Add a note to an order, a write (the ``add_note`` tool)."""
        if not note.strip():
            raise ToolError("The note is empty.", hint="call add_note with the text to record.")
        if not self.transactions:
            # Read, think, write back in two steps: exactly the window two concurrent writers race in.
            notes = self._order_or_hint(order_id)["notes"]
            if self.write_latency:
                time.sleep(self.write_latency)
            updated = f"{notes}\n{note}" if notes else note
            self.write(("UPDATE orders SET notes = ? WHERE id = ?", (updated, order_id)))
            return {"order_id": order_id, "notes": updated.split("\n")}
        if not _fits(order_id):
            self._no_order(order_id)
        con = self.connect()
        con.isolation_level = None  # explicit transactions below
        try:
            # BEGIN IMMEDIATE takes the write lock before the read, so a second writer
            # (another thread, run or process) waits here and then sees this note.
            con.execute("BEGIN IMMEDIATE")
            row = con.execute("SELECT notes FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                con.execute("ROLLBACK")
                self._no_order(order_id)
            if self.write_latency:
                time.sleep(self.write_latency)
            updated = f"{row['notes']}\n{note}" if row["notes"] else note
            con.execute("UPDATE orders SET notes = ? WHERE id = ?", (updated, order_id))
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()
        return {"order_id": order_id, "notes": updated.split("\n")}

    def refund_order(self, order_id: int, amount: float, reason: str) -> dict[str, Any]:
        """Refund an order, a write that needs the billing role (the ``refund_order`` tool)."""
        if self.role != REFUND_ROLE:
            raise PermissionDenied(f"refund_order needs role {REFUND_ROLE!r}; this agent has role {self.role!r}")
        order = self._order_or_hint(order_id)
        if not 0 < amount <= order["total"]:
            raise ToolError(f"A refund must be more than 0 and at most the order total {order['total']}.")
        self.write(
            (
                "INSERT INTO refunds (order_id, amount, reason, created_at, approved_by) VALUES (?, ?, ?, "
                "datetime('now'), ?)",
                (order_id, amount, reason, self.role),
            ),
            ("UPDATE orders SET status = 'refunded' WHERE id = ?", (order_id,)),
        )
        return {"order_id": order_id, "refunded": amount}

    # ------------------------------------------------------------- tools
    def tools(self) -> list[Tool]:
        """The shop's tools, bound to this database, ready for ``run(..., tools=...)``."""
        shop = self

        def get_order(order_id: int) -> dict[str, Any]:
            """Look up one order: items, status, total, notes and its shipment (carrier, tracking, dates, delay reason).

            Args:
                order_id: the order number, e.g. 1042.
            """
            return shop.get_order(order_id)

        def search_orders(
            customer_id: int | None = None,
            status: Status | None = None,
            text: str | None = None,
            page: int = 1,
            page_size: int = 20,
        ) -> dict[str, Any]:
            """Search orders by customer, status or text in the items and notes; results come a page at a time.

            Args:
                customer_id: only this customer's orders.
                status: only orders with this status.
                text: words that appear in the items or notes.
                page: which page of results, from 1.
                page_size: orders per page (1-100).
            """
            return shop.search_orders(customer_id, status, text, page, page_size)

        def get_customer(customer_id: int) -> dict[str, Any]:
            """Look up a customer: name, email, city, tier, customer since, number of orders.

            Args:
                customer_id: the customer's id (an order's customer_id).
            """
            return shop.get_customer(customer_id)

        def carrier_status(tracking: str) -> dict[str, Any]:
            """Ask the carrier where a parcel is now: live tracking events from the carrier's API.

            Args:
                tracking: the tracking number from the order's shipment.
            """
            return shop.carrier_status(tracking)

        def update_order_status(order_id: int, status: Status) -> dict[str, Any]:
            """Change an order's status.

            Args:
                order_id: the order number.
                status: the new status.
            """
            return shop.update_order_status(order_id, status)

        def add_note(order_id: int, note: str) -> dict[str, Any]:
            """Add a note to an order's history (customer contact, decisions taken).

            Args:
                order_id: the order number.
                note: the text to record.
            """
            return shop.add_note(order_id, note)

        def refund_order(order_id: int, amount: float, reason: str) -> dict[str, Any]:
            """Refund some or all of an order to the customer's card.

            Args:
                order_id: the order number.
                amount: the amount to refund, in pounds.
                reason: why, for the records.
            """
            return shop.refund_order(order_id, amount, reason)

        return [
            Tool(get_order, mode="read"),
            Tool(search_orders, mode="read"),
            Tool(get_customer, mode="read"),
            Tool(carrier_status, mode="read", retry=Retry(max_attempts=4, base_delay=0.2, max_delay=1.0)),
            Tool(update_order_status, mode="write"),
            Tool(add_note, mode="write"),
            Tool(refund_order, mode="write"),
        ]


def _fits(n: int) -> bool:
    """Whether ``n`` fits SQLite's 64-bit integers (a larger one cannot be any id)."""
    return -(2**63) <= n < 2**63


def _digit_swaps(n: int, existing: set[int]) -> list[int]:
    """Existing ids made of the same digits as ``n`` (a typist's transposition)."""
    if not 0 <= n < 10**7:
        return []
    digits = str(n)
    found = {int("".join(p)) for p in itertools.permutations(digits)}
    return sorted(x for x in found & existing if x != n)


def shop_tools(path: str | os.PathLike[str] | None = None, **options: Any) -> list[Tool]:
    """The shop's tools on the database at ``path`` (created on first use)."""
    return Shop(path, **options).tools()
