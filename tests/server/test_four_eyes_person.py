"""Four-eyes compares people by the one canonical person: ann cannot approve her own capture
however her name is spelt in ``on_behalf_of`` (in-process and over HTTP); a name that folds
to nothing names no one and is refused; and whoever asked for a saga to run again (its
re-run, or a resume) cannot approve it."""

from __future__ import annotations

import pytest
from server_api import Clients, MakeClient, add_token, approval_plan, as_json, plan_body

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus, parse_plan
from pivotal.errors import FourEyesError, InvalidInput, PlanRejected
from pivotal.orchestration.four_eyes import resumed_by, why_not
from pivotal.orchestration.rerun import rerun_id
from pivotal.people.principals import Role, hash_token
from pivotal.sagas.state import Event, EventType
from pivotal.store import Store
from pivotal.views.saga_scope import scoped

# "ann" as an agent may spell the person a plan is for
ANN = {
    "soft hyphen": "a\u00adnn",
    "left-to-right mark": "\u200eann",
    "right-to-left mark": "ann\u200f",
    "invisible separator": "an\u2063n",
    "tag character": "ann\U000e0041",
    "combining grapheme joiner": "an\u034fn",
    "Cyrillic a": "\u0430nn",
    "fullwidth": "\uff41\uff4e\uff4e",
    "capitals": "ANN",
}


def for_ann(spelling: str, actor: str = "agent") -> Plan:
    plan = approval_plan() | {"provenance": {"actor_id": actor, "on_behalf_of": spelling}}
    return parse_plan(as_json(plan))


async def awaiting(orchestrator: Orchestrator, plan: Plan, saga_id: str = "big") -> int:
    await orchestrator.submit(plan, saga_id=saga_id)
    state = await orchestrator.run(saga_id)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state.version


@pytest.mark.parametrize("spelling", ANN.values(), ids=ANN.keys())
async def test_ann_cannot_approve_her_own_capture_in_process(
    orchestrator: Orchestrator, spelling: str
) -> None:
    version = await awaiting(orchestrator, for_ann(spelling))
    with pytest.raises(FourEyesError, match="on behalf of ann") as refused:
        await orchestrator.approve("big", "ann", run=False, version=version)
    assert refused.value.code == "four_eyes"
    after = await orchestrator.get("big")
    assert (after.state.status, after.state.version) == (SagaStatus.AWAITING_APPROVAL, version)


@pytest.mark.parametrize("spelling", ANN.values(), ids=ANN.keys())
async def test_ann_cannot_approve_her_own_capture_over_http(
    orchestrator: Orchestrator, store: Store, clock: FakeClock, client: MakeClient, spelling: str
) -> None:
    version = await awaiting(orchestrator, for_ann(spelling))
    ann = client(await add_token(store, "ann", Role.APPROVER, clock))
    refused = await ann.post("/v1/approvals/big/approve", content=as_json({"version": version}))
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "four_eyes"
    after = await store.load("big")
    assert after is not None
    assert (after.state.status, after.state.version) == (SagaStatus.AWAITING_APPROVAL, version)
    assert (await orchestrator.run("big")).status is SagaStatus.AWAITING_APPROVAL  # no capture


async def test_an_approver_spelt_otherwise_is_still_ann(orchestrator: Orchestrator) -> None:
    version = await awaiting(orchestrator, for_ann("ann"))
    for spelling in ANN.values():
        with pytest.raises(FourEyesError):
            await orchestrator.approve("big", spelling, run=False, version=version)
    approved = await orchestrator.approve("big", "bob", run=False, version=version)
    assert approved.status is SagaStatus.RUNNING


# -- a name that folds to nothing names no one -----------------------------------------------


async def test_a_soft_hyphen_is_no_approver(orchestrator: Orchestrator) -> None:
    await awaiting(orchestrator, for_ann("ann"))
    with pytest.raises(InvalidInput, match="approver's name"):
        await orchestrator.approve("big", "\u00ad", run=False)


async def test_on_behalf_of_a_soft_hyphen_is_refused_in_process(
    orchestrator: Orchestrator,
) -> None:
    with pytest.raises(PlanRejected) as refused:
        await orchestrator.submit(for_ann("\u00ad"), saga_id="big")
    [error] = refused.value.errors
    assert (error.code.value, error.path) == ("on_behalf_of_required", "provenance.on_behalf_of")
    assert await orchestrator.store.load("big") is None


async def test_on_behalf_of_a_soft_hyphen_is_refused_over_http(
    as_role: Clients, store: Store
) -> None:
    agent = as_role[Role.AGENT]
    body = plan_body(provenance={"on_behalf_of": "\u00ad"})
    refused = await agent.post("/v1/sagas?saga_id=s1", content=as_json(body))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "plan_rejected"
    [error] = refused.json()["error"]["errors"]
    assert error["code"] == "on_behalf_of_required"
    assert await store.load(scoped("agent", "s1")) is None
    checked = await agent.post("/v1/plans/validate", content=as_json(body))
    assert [e["code"] for e in checked.json()["errors"]] == ["on_behalf_of_required"]


async def test_a_token_that_requires_on_behalf_of_is_not_satisfied_by_a_soft_hyphen(
    store: Store, clock: FakeClock, client: MakeClient
) -> None:
    secret = "pvt_test_strict_bot"
    await store.create_token(
        "strict-bot", Role.AGENT.value, hash_token(secret), clock.now(), require_on_behalf_of=True
    )
    bot = client(secret)
    for nobody in ("\u00ad", "\u200e\u2063", "\U000e0041"):
        body = plan_body(provenance={"on_behalf_of": nobody})
        refused = await bot.post("/v1/sagas?saga_id=s1", content=as_json(body))
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "on_behalf_of_required"
    assert await store.load(scoped("strict-bot", "s1")) is None


# -- whoever asked for the saga to run again --------------------------------------------------


async def rejected_and_rerun(orchestrator: Orchestrator, by: str) -> str:
    """ann rejects the capture of saga "big"; ``by`` re-runs it: the re-run waits for a
    person."""
    await awaiting(orchestrator, for_ann("maria"))
    assert (await orchestrator.reject("big", "ann", "not now")).status is SagaStatus.COMPENSATED
    again = await orchestrator.rerun("big", by)
    assert again.saga_id == rerun_id("big")
    state = await orchestrator.run(again.saga_id)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return again.saga_id


async def test_whoever_reruns_a_saga_cannot_approve_the_rerun(orchestrator: Orchestrator) -> None:
    rerun = await rejected_and_rerun(orchestrator, "olga")
    for olga in ("olga", "Olga", "\u03bflga", "ol\u00adga"):  # a Greek omicron too
        with pytest.raises(FourEyesError, match="run again") as refused:
            await orchestrator.approve(rerun, olga, run=False)
        assert refused.value.code == "four_eyes"
    assert (await orchestrator.get(rerun)).state.status is SagaStatus.AWAITING_APPROVAL
    # ann, who rejected the first, and anyone else may approve it
    approved = await orchestrator.approve(rerun, "ann", run=False)
    assert approved.status is SagaStatus.RUNNING


async def test_whoever_reruns_a_saga_cannot_approve_the_rerun_over_http(
    orchestrator: Orchestrator, store: Store, clock: FakeClock, client: MakeClient
) -> None:
    await awaiting(orchestrator, for_ann("maria"))
    assert (await orchestrator.reject("big", "ann", "not now")).status is SagaStatus.COMPENSATED
    operator = client(await add_token(store, "olga", Role.OPERATOR, clock))
    reply = await operator.post("/v1/sagas/big/rerun")
    assert reply.status_code == 201, reply.text
    rerun = reply.json()["saga_id"]
    state = await orchestrator.run(rerun)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    approver = client(await add_token(store, "Olga", Role.APPROVER, clock))  # her other token
    refused = await approver.post(
        f"/v1/approvals/{rerun}/approve", content=as_json({"version": state.version})
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "four_eyes"
    after = await store.load(rerun)
    assert after is not None
    assert (after.state.status, after.state.version) == (
        SagaStatus.AWAITING_APPROVAL,
        state.version,
    )


async def test_whoever_resumed_a_saga_cannot_approve_it(orchestrator: Orchestrator) -> None:
    await awaiting(orchestrator, for_ann("maria"))
    stored = await orchestrator.get("big")
    resumed = [Event(EventType.SAGA_RESUMED, at=0.0, data={"by": "Pe\u00adter", "why": "fixed"})]
    assert resumed_by(resumed) == {"peter"}
    assert why_not("peter", stored, resumed) == "peter resumed saga big and cannot approve it too"
    assert why_not("PETER\u200e", stored, resumed) is not None
    assert why_not("paul", stored, resumed) is None
    assert why_not("peter", stored, []) is None


async def test_the_orchestrator_reads_who_resumed_from_the_event_log(
    orchestrator: Orchestrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every approve path decides in ``Orchestrator.approve``, which reads the log."""
    await awaiting(orchestrator, for_ann("maria"))
    logged = await orchestrator.store.events("big")
    resumed = Event(EventType.SAGA_RESUMED, at=0.0, data={"by": "peter", "why": "fixed"})

    async def events(saga_id: str) -> list[Event]:
        return [*logged, resumed]

    monkeypatch.setattr(orchestrator.store, "events", events)
    with pytest.raises(FourEyesError, match="resumed"):
        await orchestrator.approve("big", "Peter", run=False)
