"""The `pivotal` command line, run as a real process against a ledger in tmp_path."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from cli_harness import open_order

from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.examples.commerce.demo import PLANNED, scenarios

pytestmark = pytest.mark.timeout(300)  # each command is a new process: slow on a busy machine


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def checkout(order: str, amount: str = "49.90") -> dict[str, Any]:
    """Two of sku-1 for ``amount``: the seeded orders "order-1".."order-5" (49.90), or one
    opened with ``open_checkout``."""
    return {
        "catalogue": "checkout",
        "steps": [
            call("reserve_stock", order_id=order, sku="sku-1", quantity=2),
            call("charge_payment", order_id=order, amount=amount),
            call("create_shipment", order_id=order),
        ],
        "rationale": f"checkout {order}",
    }


def fulfilment(order: str, amount: str) -> dict[str, Any]:
    """One lamp from warehouse B for ``amount``, confirmed to customer-{order}@example.com:
    the seeded order "4471" (180), or one opened with ``open_fulfilment``."""
    payment = {"order_id": order, "amount": amount}
    return {
        "catalogue": "fulfilment",
        "steps": [
            call("reserve_stock", order_id=order, sku="lamp", quantity=1, warehouse="B"),
            call("authorize_payment", **payment),
            call("capture_payment", **payment),
            call("create_shipment", order_id=order, warehouse="B"),
            call("send_confirmation", order_id=order, recipient=f"customer-{order}@example.com"),
        ],
        "rationale": f"ship order {order} from warehouse B, closer to the customer",
    }


def open_checkout(services: CommerceServices, order: str, amount: str = "49.90") -> None:
    """The order a ``checkout(order, amount)`` plan is for, open in ``services``."""
    open_order(services, order, amount=amount, sku="sku-1", quantity=2)


def open_fulfilment(services: CommerceServices, order: str, amount: str) -> None:
    """The order a ``fulfilment(order, amount)`` plan is for, open in ``services``."""
    open_order(services, order, amount=amount, sku="lamp", quantity=1, warehouse="B")


INVALID = {
    "catalogue": "fulfilment",
    "steps": [
        call("capture_payment", order_id="4471", amount="501"),
        call("reserve_stock", order_id="4471", sku="sku-1", quantity=1),
        call("teleport"),
    ],
}
INVALID_CODES = {"invalid_args", "kind_order", "unknown_step"}


def test_validate_reports_each_error_and_exit_codes(cli) -> None:
    good, bad = cli.plan("good.json", checkout("order-1")), cli.plan("bad.json", INVALID)

    example = "the bundled commerce example's catalogues (--app names yours)"
    assert cli.ok("validate", good) == f"valid against {example}\n"
    assert cli.json("validate", good) == {"valid": True, "errors": []}
    done = cli("validate", bad)
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error [plan_rejected]: the plan has 3 errors; it would be refused against {example}\n"
    )
    for code in INVALID_CODES:
        assert code in done.stderr
    assert "teleport" in done.stderr
    done = cli("validate", bad, "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["valid"] is False
    assert {e["code"] for e in report["errors"]} == INVALID_CODES
    assert cli.audit() == {}


def test_validate_malformed_json_names_the_code(cli) -> None:
    broken = cli.tmp / "broken.json"
    broken.write_text('{"catalogue": ')

    done = cli("validate", str(broken))

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "malformed plan" in done.stderr
    assert "plan_malformed" in done.stderr


def test_submit_then_worker_runs_the_saga(cli) -> None:
    plan = cli.plan("plan.json", checkout("order-1"))

    assert cli.ok("submit", plan, "--saga-id", "s1").strip() == "s1"
    assert cli.json("sagas", "show", "s1")["status"] == "submitted"
    out = cli.ok("worker", "--until-idle", "--poll", "0.05")

    assert "stopped: 1 passes, finished completed 1; 0 leases lost, 0 errors" in out
    shown = cli.json("sagas", "show", "s1")
    assert shown["status"] == "completed"
    assert [s["status"] for s in shown["steps"]] == ["succeeded"] * 3
    types = [e["type"] for e in shown["events"]]
    assert types[0] == "saga_submitted"
    assert types[-1] == "saga_completed"
    assert types.count("step_started") == types.count("step_succeeded") == 3
    assert [s["saga_id"] for s in cli.json("sagas", "list")] == ["s1"]
    assert cli.audit()["s1"].status.value == "completed"
    assert cli.sql("SELECT lease_owner FROM sagas") == [(None,)]


def test_resubmission_is_idempotent_and_a_conflict_changes_nothing(cli) -> None:
    plan = cli.plan("plan.json", checkout("order-1"))
    cli.ok("submit", plan, "--saga-id", "s1")
    before = cli.json("sagas", "show", "s1")

    assert cli.ok("submit", plan, "--saga-id", "s1").strip() == "s1"
    other = cli.plan("other.json", checkout("order-1", amount="12.00"))
    done = cli("submit", other, "--saga-id", "s1")

    assert done.returncode == 2
    assert "already exists with a different plan" in done.stderr
    assert cli.json("sagas", "show", "s1") == before
    assert len(cli.json("sagas", "list")) == 1
    assert "saga_conflict" in done.stderr


def test_approvals_through_the_cli(cli) -> None:
    services = CommerceServices(cli.tmp / "commerce.db")
    open_fulfilment(services, "4480", "200")
    services.close()
    cli.ok("submit", cli.plan("s2.json", fulfilment("4471", "180")), "--saga-id", "s2")
    cli.ok("submit", cli.plan("s3.json", fulfilment("4480", "200")), "--saga-id", "s3")
    cli.ok("worker", "--until-idle", "--poll", "0.05")

    pending = {p["saga_id"]: p for p in cli.json("approvals", "list")}
    assert set(pending) == {"s2", "s3"}
    assert pending["s2"]["status"] == "pending"
    assert pending["s2"]["rationale"] == fulfilment("4471", "180")["rationale"]
    assert "exceeds the approval threshold 150" in pending["s2"]["reason"]

    assert "completed" in cli.ok(
        "approvals", "approve", "s2", "--by", "alice", "--note", "ok", "--run"
    )
    assert "compensated" in cli.ok("approvals", "reject", "s3", "--by", "bob", "--note", "no")

    s2, s3 = cli.json("sagas", "show", "s2"), cli.json("sagas", "show", "s3")
    assert s2["status"] == "completed"
    assert (s2["approval"]["status"], s2["approval"]["approver"]) == ("approved", "alice")
    assert s2["approval"]["note"] == "ok"
    assert s3["status"] == "compensated"
    assert (s3["approval"]["status"], s3["approval"]["approver"]) == ("rejected", "bob")
    assert [s["undo_status"] for s in s3["steps"][:2]] == ["done", "done"]
    assert cli.json("approvals", "list") == []
    assert {k: v.status.value for k, v in cli.audit().items()} == {
        "s2": "completed",
        "s3": "compensated",
    }
    services = CommerceServices(cli.tmp / "commerce.db")
    assert [p["order_id"] for p in services.rows("payments", kind="capture")] == ["4471"]
    services.close()


def test_approvals_list_json_names_the_step(cli) -> None:
    cli.ok("submit", cli.plan("s2.json", fulfilment("4471", "180")), "--saga-id", "s2")
    cli.ok("worker", "--until-idle", "--poll", "0.05")

    [pending] = cli.json("approvals", "list")

    assert pending["saga_id"] == "s2"
    assert pending["step"] == "capture_payment"  # the table's "step" column: the step's name


def test_dead_letters_through_the_cli(cli) -> None:
    services = CommerceServices(cli.tmp / "commerce.db")
    services.faults.next("charge", Fault.PERMANENT, Fault.PERMANENT)
    services.faults.always("release", Fault.PERMANENT)
    for saga in ("d1", "d2"):
        open_checkout(services, saga)
        cli.ok("submit", cli.plan(f"{saga}.json", checkout(saga)), "--saga-id", saga)
    # Only the sweep at its start: a slow run must not also retry the letters it parked.
    cli.ok("worker", "--until-idle", "--poll", "0.05", "--sweep-every", "3600")

    letters = {d["saga_id"]: d for d in cli.json("dead-letters", "list")}
    assert set(letters) == {"d1", "d2"}
    assert {d["status"] for d in letters.values()} == {"open"}
    first, second = str(letters["d1"]["id"]), str(letters["d2"]["id"])
    # who asks is recorded, as the API's and the page's retry record it: --by is needed
    assert cli("dead-letters", "retry", first).returncode == 2
    assert cli("dead-letters", "retry", first, "--by", " ").returncode == 2
    [untouched] = [d for d in cli.json("dead-letters", "list") if d["saga_id"] == "d1"]
    assert untouched["retries"] == 0
    done = cli("dead-letters", "retry", first, "--by", "ana")
    assert (done.returncode, done.stdout.strip()) == (1, f"dead letter {first}: still failing")
    [again] = [d for d in cli.json("dead-letters", "list") if d["saga_id"] == "d1"]
    assert again["retries"] == 1
    d1 = cli.json("sagas", "show", "d1")
    [asked] = [e for e in d1["events"] if e["type"] == "dead_letters_due"]
    assert asked["data"] == {"by": "ana", "letters": [int(first)]}

    services.faults.clear()
    assert "settled" in cli.ok("dead-letters", "retry", first, "--by", "ana")
    assert cli("dead-letters", "resolve", second, "--by", "bob", "--reason", " ").returncode == 2
    assert "resolved by bob" in cli.ok(
        "dead-letters", "resolve", second, "--by", "bob", "--reason", "released by hand"
    )

    assert cli.json("dead-letters", "list") == []
    settled = {d["saga_id"]: d for d in cli.json("dead-letters", "list", "--all")}
    assert settled["d1"]["resolution"] == "the undo succeeded"
    assert settled["d2"]["resolution"] == "released by hand"
    d2 = cli.json("sagas", "show", "d2")
    [resolved] = [e for e in d2["events"] if e["type"] == "dead_letter_resolved"]
    assert resolved["data"] == {"by": "bob", "reason": "released by hand"}
    statuses = {k: v.status.value for k, v in cli.audit().items()}
    assert statuses == {"d1": "compensated", "d2": "compensated"}
    assert [r["key"] for r in services.rows("effects", op="release")] == ["d1:0:undo"]
    reservations = {r["key"]: r["status"] for r in services.rows("reservations")}
    assert reservations == {"d1:0": "released", "d2:0": "active"}  # d2 was settled by hand
    services.close()


def test_demo_runs_every_scenario_as_expected(cli) -> None:
    out = cli.ok("demo", "--out", str(cli.tmp / "demo"))

    rows = [line for line in out.splitlines() if "│ demo-" in line]
    titles = [s.title for s in scenarios()] + [PLANNED]
    assert len(titles) == len(rows) == 9
    for n, (title, row) in enumerate(zip(titles, rows, strict=True), 1):
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert cells[0] == title
        assert cells[1] == f"demo-{n}"
        assert cells[3] == "yes", row


def test_unknown_saga_id_is_reported(cli) -> None:
    cli.ok("migrate")  # an empty ledger
    done = cli("sagas", "show", "nope")

    assert done.returncode == 2
    assert "no saga 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    assert "saga_not_found" in done.stderr


def test_an_app_module_not_found_names_the_folders_searched_and_how_to_add_one(cli) -> None:
    plan = cli.plan("plan.json", checkout("o-1"))
    how = (
        "run from the folder that holds no_such_module.py or no_such_module/ with "
        "PYTHONPATH=. set, or add that folder to PYTHONPATH"
    )
    done = cli("validate", plan, app="no_such_module:app")  # PYTHONPATH: the working folder
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "error [app_not_found]: no module 'no_such_module' (the app's module) in the folders "
        f"searched: {cli.tmp}, "
    ), line
    assert "the installed packages; " in line
    assert line.endswith(how)

    source = os.environ.get("PYTHONPATH")  # where the tests find pivotal, if anywhere
    cli.env = {k: v for k, v in cli.env.items() if k != "PYTHONPATH"}
    cli.env |= {"PYTHONPATH": source} if source else {}
    done = cli("validate", plan, app="no_such_module.sub:app")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "error [app_not_found]: no module 'no_such_module' (a package of 'no_such_module.sub') "
    ), line
    assert f"the installed packages, not the working folder {cli.tmp}; " in line
    assert line.endswith(how)

    # a module the app itself imports, missing: the app was found, its import failed
    (cli.tmp / "needs_more.py").write_text("import no_such_dependency\n")
    cli.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cli.tmp), source) if p)
    done = cli("validate", plan, app="needs_more:app")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error [app_load_failed]: cannot import 'needs_more': No module named 'no_such_dependency'"
    )
    assert "Traceback" not in done.stderr
