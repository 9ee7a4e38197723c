"""The example shop: a real SQLite database, its tools, and the trouble they can be made to show."""

from __future__ import annotations

import sqlite3
import threading

import pytest

import agentlab as al
from agentlab import reply
from agentlab.shop import CarrierAPI, Shop, schema_sql

from .helpers import PRICES, last_tool_results


def tools_by_name(shop: Shop) -> dict[str, al.Tool]:
    return {t.name: t for t in shop.tools()}


def test_database_is_created_from_the_shipped_sql_on_first_use(tmp_path):
    """Opening a new path builds the shop from agentlab/data/shop.sql; all four tables are filled."""
    path = tmp_path / "db" / "shop.sqlite"
    Shop(path)
    con = sqlite3.connect(path)
    counts = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("customers", "orders", "shipments", "refunds")
    }
    con.close()
    assert counts == {"customers": 40, "orders": 240, "shipments": 215, "refunds": 1}
    assert "CREATE TABLE orders" in schema_sql()


def test_an_existing_database_is_reused_so_writes_persist(tmp_path):
    """A second Shop on the same file sees the first one's writes: it is not rebuilt."""
    path = tmp_path / "shop.sqlite"
    Shop(path).add_note(1042, "called the customer")
    assert Shop(path).get_order(1042)["notes"] == ["called the customer"]


def test_order_1042_tells_the_late_delivery_story():
    """The order every example asks about: promised 8 March, delivered 13 March, with the carrier's reason."""
    order = Shop().get_order(1042)
    assert order["customer_id"] == 7 and order["status"] == "delivered"
    ship = order["shipment"]
    assert (ship["promised_on"], ship["delivered_on"], ship["carrier"]) == ("2024-03-08", "2024-03-13", "ParcelNorth")
    assert "storm" in ship["delay_reason"]


def test_missing_order_is_recoverable_and_names_the_next_step():
    """No order 1402: the error names the real id with the same digits and how to list a customer's orders."""
    with pytest.raises(al.ToolError) as err:
        Shop().get_order(1402)
    text = err.value.for_model()
    assert "No order 1402" in text and "1042" in text
    assert "Next step: search_orders(customer_id=...)" in text


def test_search_pages_through_orders_and_filters():
    """Pages cover every order once; filters by customer and text narrow the results."""
    shop = Shop()
    first = shop.search_orders(page_size=100)
    assert first["total"] == 240 and first["pages"] == 3
    seen = [o["id"] for p in (1, 2, 3) for o in shop.search_orders(page=p, page_size=100)["orders"]]
    assert seen == list(range(1001, 1241))
    dana = shop.search_orders(customer_id=7)
    assert 1042 in [o["id"] for o in dana["orders"]]
    assert all("kettle" in o["items"].lower() for o in shop.search_orders(text="kettle", page_size=100)["orders"])


def test_bad_search_arguments_are_recoverable_errors():
    """Page 0 or a page size of 500 tell the model what to use instead."""
    shop = Shop()
    with pytest.raises(al.ToolError, match="page must be 1 or more"):
        shop.search_orders(page=0)
    with pytest.raises(al.ToolError, match="page_size must be between 1 and 100"):
        shop.search_orders(page_size=500)


def test_refund_needs_a_role_the_agent_does_not_have():
    """refund_order raises PermissionDenied naming the role; nothing is written."""
    shop = Shop()
    with pytest.raises(al.PermissionDenied, match="needs role 'billing'; this agent has role 'support_agent'"):
        shop.refund_order(1042, 20.0, "late")
    assert shop.query("SELECT count(*) AS n FROM refunds WHERE order_id = 1042")[0]["n"] == 0


def test_billing_role_can_refund_and_the_refund_is_recorded():
    """With the billing role the same call writes a refund row and marks the order refunded."""
    shop = Shop(role="billing")
    assert shop.refund_order(1042, 20.0, "late")["refunded"] == 20.0
    assert shop.get_order(1042)["status"] == "refunded"
    assert shop.query("SELECT amount FROM refunds WHERE order_id = 1042") == [{"amount": 20.0}]


def test_setting_status_refunded_is_the_same_permission():
    """The side door (a status change to 'refunded') is denied too; other statuses go through."""
    shop = Shop()
    with pytest.raises(al.PermissionDenied):
        shop.update_order_status(1042, "refunded")
    assert shop.update_order_status(1042, "on hold") == {"order_id": 1042, "status": "on hold", "was": "delivered"}


def test_tools_declare_read_and_write_modes_and_validate_status():
    """Reads may run together, writes run alone; an unknown status is refused by the schema."""
    tools = tools_by_name(Shop())
    assert {n for n, t in tools.items() if t.mode == "read"} == {
        "get_order",
        "search_orders",
        "get_customer",
        "carrier_status",
    }
    assert {n for n, t in tools.items() if t.mode == "write"} == {"update_order_status", "add_note", "refund_order"}
    with pytest.raises(al.ToolError, match="'status'"):
        tools["update_order_status"].validate({"order_id": 1042, "status": "lost"})


def test_flaky_carrier_fails_twice_with_503_then_answers():
    """fail_first=2: two retryable 503s, then the carrier's tracking events."""
    carrier = CarrierAPI(fail_first=2)
    shop = Shop(carrier=carrier)
    for n in (1, 2):
        with pytest.raises(al.RetryableError, match=f"503 Service Unavailable .* \\(call {n}\\)"):
            shop.carrier_status("PN-88213-GB")
    answer = shop.carrier_status("PN-88213-GB")
    assert answer["state"] == "delivered" and any("delayed" in e["event"] for e in answer["events"])


def test_flakiness_belongs_to_one_carrier_not_to_every_run():
    """A second shop with its own flaky carrier starts failing from scratch."""
    a, b = Shop(carrier=CarrierAPI(fail_first=1)), Shop(carrier=CarrierAPI(fail_first=1))
    with pytest.raises(al.RetryableError):
        a.carrier_status("PN-88213-GB")
    assert a.carrier_status("PN-88213-GB")["state"] == "delivered"
    with pytest.raises(al.RetryableError):
        b.carrier_status("PN-88213-GB")


def test_a_hanging_carrier_call_returns_when_the_shop_closes():
    """hang=True blocks the calling thread until close(); then that thread finishes with a connection error."""
    shop = Shop(carrier=CarrierAPI(hang=True))
    box: dict[str, BaseException] = {}

    def call() -> None:
        try:
            shop.carrier_status("PN-88213-GB")
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(0.2)
    assert worker.is_alive()
    shop.close()
    worker.join(10)
    assert not worker.is_alive() and isinstance(box["error"], ConnectionError)


def test_flaky_carrier_is_retried_invisibly_in_a_run():
    """In a real run the model gets the answer only; the trace shows three attempts."""
    shop = Shop(carrier=CarrierAPI(fail_first=2))
    model = al.ScriptedModel([reply(None, ("carrier_status", {"tracking": "PN-88213-GB"})), reply("ok")])
    result = al.run("where?", shop.tools(), model=model, prices=PRICES, clock=al.FakeClock(), trace=False)
    block = last_tool_results(result.messages[:-1])[0]
    assert "503" not in block["content"] and '"state": "delivered"' in block["content"]
    assert shop.carrier.calls == 3


def test_serialized_notes_keep_both_but_notes_run_as_reads_lose_one():
    """The race the scheduler prevents (on the lesson's shop without transactions): the same two notes,
    declared write, both survive; declared read, one is lost."""
    calls = [("add_note", {"order_id": 1042, "note": "first"}), ("add_note", {"order_id": 1042, "note": "second"})]

    def notes_after(mode: str) -> list[str]:
        shop = Shop(write_latency=0.5, transactions=False)
        add_note = al.Tool(tools_by_name(shop)["add_note"].fn, name="add_note", mode=mode)
        model = al.ScriptedModel([reply(None, *calls), reply("done")])
        al.run("note it", [add_note], model=model, prices=PRICES, trace=False)
        return shop.get_order(1042)["notes"]

    assert notes_after("write") == ["first", "second"]
    assert len(notes_after("read")) == 1


@pytest.mark.parametrize(
    ("options", "match"),
    [({"latency": -1}, "latency"), ({"write_latency": "slow"}, "write_latency"), ({"role": ""}, "role")],
)
def test_bad_shop_options_are_refused_naming_the_parameter(options, match):
    """A negative latency or an empty role is a clear error that names the option."""
    with pytest.raises(ValueError, match=match):
        Shop(**options)


def test_bad_carrier_options_are_refused_naming_the_parameter():
    """fail_first must be a whole number >= 0."""
    with pytest.raises(ValueError, match="fail_first"):
        CarrierAPI(fail_first=-2)


def test_a_temporary_shop_is_removed_on_close():
    """Shop() with no path leaves nothing behind once closed."""
    shop = Shop()
    assert shop.path.exists()
    shop.close()
    assert not shop.path.exists()


def test_search_text_is_matched_literally_not_as_a_like_pattern(tmp_path):
    """'%' and '_' typed by the model are characters to find, not wildcards matching every order."""
    shop = Shop(tmp_path / "shop.sqlite")
    assert shop.search_orders(text="%")["total"] == 0
    assert shop.search_orders(text="_")["total"] == 0
    assert shop.search_orders(text="\\")["total"] == 0
    shop.add_note(1042, "code SAVE_50% applied")
    shop.add_note(1043, "code SAVEX50 applied")
    found = shop.search_orders(text="SAVE_50%")
    assert [o["id"] for o in found["orders"]] == [1042]
    assert shop.search_orders(text="mug")["total"] > 0  # plain text still finds items


@pytest.mark.parametrize("order_id", [10**30, -(10**30), 2**63])
def test_an_out_of_range_order_number_is_a_recoverable_error(tmp_path, order_id):
    """The model sees 'no such order' and can try again; the run is not stopped by an OverflowError."""
    shop = Shop(tmp_path / "shop.sqlite")
    for call in (
        lambda: shop.get_order(order_id),
        lambda: shop.add_note(order_id, "x"),
        lambda: shop.update_order_status(order_id, "packed"),
    ):
        with pytest.raises(al.ToolError, match="No order with an id that large"):
            call()
    with pytest.raises(al.ToolError, match="No customer"):
        shop.get_customer(10**30)
    with pytest.raises(al.ToolError, match="too large"):
        shop.search_orders(customer_id=10**30)
    model = al.ScriptedModel([reply(None, ("get_order", {"order_id": order_id})), reply("sorry, no such order")])
    result = al.run("find it", shop.tools(), model=model, prices=PRICES, trace=False)
    assert isinstance(result, al.Done)
    assert last_tool_results(result.messages[:-1])[0]["is_error"]


def test_notes_added_at_once_from_two_connections_are_all_kept(tmp_path):
    """Two runs (here two Shop objects on one file, on threads) adding notes at the same time lose none."""
    path = tmp_path / "shop.sqlite"
    Shop(path)
    shops = [Shop(path, write_latency=0.02), Shop(path, write_latency=0.02)]
    start = threading.Barrier(len(shops))

    def add(i: int) -> None:
        start.wait()
        for k in range(4):
            shops[i].add_note(1042, f"run{i}-note{k}")

    threads = [threading.Thread(target=add, args=(i,)) for i in range(len(shops))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    notes = Shop(path).get_order(1042)["notes"]
    assert sorted(notes) == sorted(f"run{i}-note{k}" for i in range(2) for k in range(4))


def test_notes_added_by_two_processes_on_one_file_are_all_kept(tmp_path):
    """The same with two real processes, each running its own agent loop on the shop."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "shop.sqlite"
    Shop(path)
    script = textwrap.dedent(f"""
        import sys
        import agentlab as al
        from agentlab.shop import Shop
        tag = sys.argv[1]
        shop = Shop({str(path)!r}, write_latency=0.02)
        calls = [al.reply(None, ("add_note", {{"order_id": 1042, "note": f"{{tag}}-{{k}}"}})) for k in range(4)]
        r = al.run("note", shop.tools(), model=al.ScriptedModel(calls + [al.reply("done")]), trace=False, max_cost=None)
        assert isinstance(r, al.Done), r
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    notes = Shop(path).get_order(1042)["notes"]
    assert sorted(notes) == sorted(f"{t}-{k}" for t in "ab" for k in range(4))
