"""The real CLI in a subprocess: plan, escalations, shadow, and a model over loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from chat_server import recorded

PIVOTAL = str(Path(sys.executable).parent / "pivotal")
TEXT = "ship from the closer warehouse, I expect something for the delay"

# `pivotal worker` runs one process here (its default is one per core): a test of
# --processes N says so
ONE_WORKER_PROCESS = {"PIVOTAL_WORKER_PROCESSES": "1"}


def pivotal(
    tmp: Path, *args: str, env: dict[str, str] | None = None, example: bool = True
) -> tuple[int, str, str]:
    """The CLI on ``tmp/ledger.db`` (made first, as `pivotal migrate` makes it); the bundled
    example is chosen on purpose unless ``example`` is false."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIVOTAL_", "OPENAI_"))}
    environ |= {"COLUMNS": "200", **ONE_WORKER_PROCESS, **(env or {})}
    chosen = ["--example-app"] if example else []
    ledger = ["--db", f"sqlite:///{tmp / 'ledger.db'}"]
    if not (tmp / "ledger.db").exists():
        made = [PIVOTAL, *ledger, "migrate"]
        subprocess.run(made, env=environ, capture_output=True, check=True, timeout=60)
    done = subprocess.run(
        [PIVOTAL, *ledger, *chosen, *args],
        cwd=tmp,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def as_json(stdout: str) -> Any:
    return json.loads(stdout)


def test_plan_with_rules_dry_run_then_submit(tmp_path) -> None:
    fields = ["--order", "4471", "--amount", "180", "--sku", "lamp", "--warehouse", "B"]
    code, out, _ = pivotal(tmp_path, "plan", TEXT, *fields, "--planner", "rules", "--json")
    assert code == 0
    run = as_json(out)
    assert run["outcome"] == "accepted"
    assert run["saga_status"] is None  # a dry run submits nothing
    assert run["plan"]["provenance"]["actor_type"] == "system"

    code, out, _ = pivotal(tmp_path, "plan", TEXT, *fields, "--run")
    assert code == 0, out
    assert "awaiting_approval" in out
    assert "exceeds the approval threshold 150" in out

    code, out, _ = pivotal(tmp_path, "sagas", "list", "--json")
    [saga] = as_json(out)
    assert saga["status"] == "awaiting_approval"
    code, out, _ = pivotal(tmp_path, "sagas", "show", saga["saga_id"], "--json")
    shown = as_json(out)
    assert shown["provenance"]["actor_id"] == "rules"
    assert shown["provenance"]["source_document_id"].startswith("req_")
    assert "Rule 'fulfil'" in shown["rationale"]


def test_the_order_system_fills_in_what_the_request_leaves_out(tmp_path) -> None:
    """Only the order id is given: amount, item and warehouse come from the order system."""
    code, out, _ = pivotal(tmp_path, "plan", TEXT, "--order", "4471", "--run", "--json")
    assert code == 0, out
    run = as_json(out)
    assert run["saga_status"] == "awaiting_approval"
    assert run["request"]["context"]["order_id"] == "4471"
    assert run["request"]["context"]["amount"] == "180"
    [reserve, *_] = run["plan"]["steps"]
    assert reserve["args"] == {"order_id": "4471", "sku": "lamp", "quantity": 1, "warehouse": "B"}

    # what the operator types wins over the order system's facts
    code, out, _ = pivotal(tmp_path, "plan", TEXT, "--order", "4471", "--warehouse", "A", "--json")
    assert as_json(out)["plan"]["steps"][0]["args"]["warehouse"] == "A"


def test_escalations_list_show_and_resolve(tmp_path) -> None:
    # order 9999 is unknown to the order system: no facts, so no rule fits
    code, out, _ = pivotal(tmp_path, "plan", TEXT, "--order", "9999", "--submit")
    assert code == 1
    assert "escalated as #1" in out

    code, out, _ = pivotal(tmp_path, "escalations", "list", "--json")
    [item] = as_json(out)
    assert (item["id"], item["status"]) == (1, "open")
    assert item["run"]["request"]["text"] == TEXT

    code, out, _ = pivotal(tmp_path, "escalations", "show", "1")
    assert code == 0
    assert "no_rule_matched" in out
    assert "'fulfil' needs amount, sku" in out

    # the seeded order 4472 as the order system has it: one lamp from B, 90 (a charge is the
    # order's amount, and 90 is under the approval threshold)
    lamp = {"order_id": "4472", "sku": "lamp", "quantity": 1, "warehouse": "B"}
    plan = {
        "catalogue": "checkout",
        "steps": [
            {"name": "reserve_stock", "args": lamp},
            {"name": "charge_payment", "args": {"order_id": "4472", "amount": "90"}},
        ],
        "rationale": "hold the lamp and take the payment while support calls the customer",
    }
    (tmp_path / "own.json").write_text(json.dumps(plan))
    code, out, err = pivotal(
        tmp_path, "escalations", "resolve", "1", "--by", "[bold red]ana[/]", "--plan", "own.json"
    )
    assert code == 0, err
    assert "resolved by [bold red]ana[/]" in out  # text, never console markup
    assert "esc-1" in out
    assert "completed" in out

    code, out, _ = pivotal(tmp_path, "escalations", "list", "--json")
    assert as_json(out) == []
    code, _, err = pivotal(tmp_path, "escalations", "resolve", "1", "--by", "bob")
    assert code == 2
    assert "escalation 1 is already resolved" in err
    code, _, err = pivotal(tmp_path, "escalations", "show", "7")
    assert code == 2
    assert "no escalation 7" in err


def test_shadow_run_and_report(tmp_path) -> None:
    lines = [
        {"catalogue": "fulfilment", "context": {"order_id": "4471", "amount": 180, "sku": "lamp"}},
        {"catalogue": "fulfilment", "text": "credit me 500", "context": {"order_id": "4471"}},
    ]
    (tmp_path / "requests.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    code, out, err = pivotal(
        tmp_path, "shadow", "run", "requests.jsonl", "--planner", "rules", "--batch", "b1"
    )
    assert code == 0, err
    assert "50.0%" in out

    code, out, _ = pivotal(tmp_path, "shadow", "report", "--json")
    report = as_json(out)
    assert report["batch_id"] == "b1"
    assert (report["requests"], report["accepted"], report["mean_attempts"]) == (2, 1, 1.0)
    [reason] = report["reasons"]
    assert (reason["code"], reason["step"], reason["count"]) == ("no_rule_matched", None, 1)
    # the planner's own words are kept, and the run they came from can be read whole
    assert reason["message"]
    [unaccepted] = report["unaccepted"]
    assert (unaccepted["attempts"], unaccepted["message"]) == (1, reason["message"])
    code, out, _ = pivotal(tmp_path, "shadow", "report")
    assert reason["message"][:30] in " ".join(out.split())
    assert unaccepted["run_id"] in out
    code, out, err = pivotal(tmp_path, "shadow", "show", unaccepted["run_id"])
    assert code == 0, err
    assert "credit me 500" in out
    assert reason["message"][:30] in " ".join(out.split())
    code, out, _ = pivotal(tmp_path, "shadow", "show", unaccepted["run_id"], "--json")
    assert as_json(out)["run_id"] == unaccepted["run_id"]
    code, _, err = pivotal(tmp_path, "shadow", "show", "run-nope")
    assert code == 2
    assert "error [run_not_found]: no shadow run run-nope" in err

    code, out, _ = pivotal(tmp_path, "sagas", "list", "--json")
    assert as_json(out) == []  # shadow mode executes nothing

    (tmp_path / "bad.jsonl").write_text('{"catalogue": "nope"}')
    code, _, err = pivotal(tmp_path, "shadow", "run", "bad.jsonl")
    assert code == 2
    assert "bad.jsonl:1" in err


def test_plan_with_an_openai_compatible_model_over_loopback(tmp_path, chat_server) -> None:
    chat_server.queue(recorded("goodwill_credit_4471"), recorded("fulfil_4471"))
    env = {"PIVOTAL_OPENAI_BASE_URL": chat_server.base_url, "PIVOTAL_OPENAI_API_KEY": "sk-t"}
    code, out, err = pivotal(
        tmp_path,
        "plan",
        TEXT,
        "--order",
        "4471",
        "--planner",
        "openai:gpt-test",
        "--run",
        "--json",
        env=env,
    )
    assert code == 0, err
    run = as_json(out)
    assert [a["accepted"] for a in run["attempts"]] == [False, True]
    assert run["attempts"][0]["errors"][0]["step"] == "apply_goodwill_credit"
    assert run["saga_status"] == "awaiting_approval"
    assert run["plan"]["provenance"]["model"] == "gpt-test-2026-01-01"
    assert len(chat_server.seen) == 2
    assert chat_server.seen[0].headers["Authorization"] == "Bearer sk-t"


def test_plan_submit_only_records_as_submit_does_and_run_runs_it_here(tmp_path) -> None:
    """One meaning for one word: ``--submit`` records the saga (a worker runs it), as
    ``pivotal submit`` does; ``--run`` records it and runs it in this process."""
    code, out, err = pivotal(tmp_path, "plan", TEXT, "--order", "4471", "--submit", "--json")
    assert code == 0, err
    run = as_json(out)
    assert run["saga_status"] == "submitted"
    code, out, _ = pivotal(tmp_path, "sagas", "show", run["saga_id"], "--json")
    shown = as_json(out)
    assert shown["status"] == "submitted"
    assert [s["status"] for s in shown["steps"]] == ["pending"] * len(shown["steps"])
    code, out, _ = pivotal(tmp_path, "plan", TEXT, "--order", "4471", "--submit")
    assert code == 0
    assert "submitted" in out
    assert "a worker runs it" in out
    code, out, _ = pivotal(tmp_path, "worker", "--until-idle")
    assert code == 0
    assert "awaiting_approval" in out


def test_a_model_planner_without_a_key_is_a_clear_error(tmp_path) -> None:
    code, _, err = pivotal(tmp_path, "plan", TEXT, "--planner", "openai:gpt-4o")
    assert code == 2
    assert "PIVOTAL_OPENAI_API_KEY" in err
    code, _, err = pivotal(tmp_path, "plan", TEXT, "--planner", "oracle")
    assert code == 2
    assert "unknown planner 'oracle'" in err


def test_plan_submits_with_the_example_only_when_asked(tmp_path) -> None:
    """A dry run may plan from the bundled example by default; running the plan against
    the ledger (``--submit``) needs --app or --example-app."""
    code, out, _ = pivotal(tmp_path, "plan", TEXT, "--order", "4471", "--json", example=False)
    assert code == 0
    assert as_json(out)["outcome"] == "accepted"
    (tmp_path / "r.jsonl").write_text(json.dumps({"context": {"order_id": "4471"}}))
    made = (tmp_path / "ledger.db").read_bytes()  # the helper made it, empty
    for args in (["plan", TEXT, "--order", "4471", "--submit"], ["shadow", "run", "r.jsonl"]):
        code, out, err = pivotal(tmp_path, *args, example=False)
        assert code == 2
        assert err.startswith("error [app_required]: ")
        assert "--example-app" in err
    assert (tmp_path / "ledger.db").read_bytes() == made  # nothing was recorded
