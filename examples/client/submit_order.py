# examples/client/submit_order.py
"""Submit a checkout of the bundled example's order-5 to a running `pivotal serve`, as an
agent's service would, and read it back. PIVOTAL_URL is the server, PIVOTAL_TOKEN an agent's
token (`pivotal tokens create --name shop-bot --role agent`)."""

import os

from pivotal import PlanRejected
from pivotal.client import Client

plan = {
    "catalogue": "checkout",
    "steps": [
        {"name": "reserve_stock", "args": {"order_id": "order-5", "sku": "sku-1", "quantity": 2}},
        {"name": "charge_payment", "args": {"order_id": "order-5", "amount": "49.90"}},
        {"name": "create_shipment", "args": {"order_id": "order-5"}},
    ],
    "rationale": "the customer checked out order-5",
}

with Client(os.environ["PIVOTAL_URL"], token=os.environ["PIVOTAL_TOKEN"]) as pivotal:
    checked = pivotal.validate(plan)  # nothing is recorded
    for error in checked.errors:
        print(f"{error['code']} at {error['path']}: {error['message']}")
    try:
        # the saga id makes it idempotent: sent again (by the client's retries, or by
        # running this script twice) it is the same saga, never a second one
        saga = pivotal.submit(plan, saga_id="checkout-order-5")
    except PlanRejected as rejected:
        raise SystemExit(f"rejected: {[e.code for e in rejected.errors]}") from None
    print(saga.saga_id, saga.status, "recorded" if saga.created else "already recorded")
    print(pivotal.get(saga.saga_id).status)  # a worker runs it; read it again later
