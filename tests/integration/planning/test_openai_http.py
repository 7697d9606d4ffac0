"""The OpenAI-compatible planner over real HTTP on loopback, against recorded replies."""

from __future__ import annotations

import socket

import pytest
from chat_server import FakeChatServer, event_provenance_refs, recorded

from pivotal import ActorType, SagaStatus
from pivotal.planning import (
    OpenAIConfig,
    OpenAIPlanner,
    PlannerConfigError,
    PlanningOutcome,
    PlanRequest,
    plan_and_submit,
    propose_plan,
    render_catalogue,
)
from pivotal.planning.prompt import PROMPT_VERSION

REQUEST = PlanRequest(
    text="ship from the closer warehouse, and I expect something for the delay",
    context={"order_id": "4471", "amount": 180, "customer_tier": "standard"},
    catalogue="fulfilment",
    source_document_id="email-4471",
)


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def make_planner(server: FakeChatServer, sleeps: Sleeps | None = None, **cfg) -> OpenAIPlanner:
    config = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key="sk-test", **cfg)
    return OpenAIPlanner(config, sleep=sleeps or Sleeps())


async def plan(server, app, planner=None, max_replans=2):
    planner = planner or make_planner(server)
    return await propose_plan(
        REQUEST, planner, app.catalogue("fulfilment"), max_replans=max_replans, facts=app.facts
    )


async def test_a_valid_reply_becomes_a_saga_with_the_models_provenance(
    chat_server, orchestrator, store, app
) -> None:
    chat_server.queue(recorded("fulfil_4471"))
    run = await plan_and_submit(REQUEST, make_planner(chat_server), orchestrator)

    assert run.outcome is PlanningOutcome.ACCEPTED
    [seen] = chat_server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["Authorization"] == "Bearer sk-test"
    assert seen.body["model"] == "gpt-test"
    view = render_catalogue(app.catalogue("fulfilment"))
    assert seen.body["response_format"]["json_schema"]["schema"] == view.schema
    assert [m["role"] for m in seen.body["messages"]] == ["system", "user"]

    stored = await orchestrator.get(run.saga_id)
    prov = stored.plan.provenance
    assert prov.actor_type is ActorType.AGENT
    assert prov.actor_id == "openai:gpt-test"
    assert prov.model == "gpt-test-2026-01-01"  # the model that served the reply
    assert prov.prompt_version == PROMPT_VERSION
    assert prov.run_id == run.run_id
    assert prov.source_document_id == "email-4471"
    assert "goodwill credit" in stored.plan.rationale
    refs = await event_provenance_refs(store, run.saga_id)
    assert refs == [stored.state.provenance_ref]
    assert await store.provenance(stored.state.provenance_ref) == prov


async def test_the_goodwill_credit_is_rejected_and_the_replan_accepted(
    chat_server, orchestrator, services
) -> None:
    chat_server.queue(recorded("goodwill_credit_4471"), recorded("fulfil_4471"))
    run = await plan_and_submit(REQUEST, make_planner(chat_server), orchestrator)

    assert [a.accepted for a in run.attempts] == [False, True]
    [error] = run.attempts[0].errors
    assert (error.code, error.step) == ("unknown_step", "apply_goodwill_credit")
    second = chat_server.seen[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "apply_goodwill_credit" in second[2]["content"]  # its own reply, replayed
    assert "[unknown_step] at steps[2].name" in second[3]["content"]

    state = await orchestrator.run(run.saga_id)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert services.calls("capture") == []


@pytest.mark.parametrize(
    ("reply", "code", "says"),
    [
        ("prose_instead_of_json", "planner_reply_malformed", "not valid JSON"),
        ("json_array", "planner_reply_malformed", "not an object"),
        ("truncated", "planner_reply_malformed", "cut off at the token limit"),
        ("no_choices", "planner_reply_malformed", "no choices[0].message"),
        ("proxy_html_page", "planner_reply_malformed", "reply is not JSON"),
        ("refusal", "planner_refused", "can't help with issuing refunds"),
    ],
)
async def test_a_bad_reply_is_a_failed_attempt_then_the_model_retries(
    chat_server, app, reply, code, says
) -> None:
    chat_server.queue(recorded(reply), recorded("fulfil_4471"))
    run = await plan(chat_server, app)

    assert run.outcome is PlanningOutcome.ACCEPTED
    first, second = run.attempts
    [error] = first.errors
    assert error.code == code
    assert says in error.message
    assert first.plan is None
    assert second.accepted
    assert len(chat_server.seen) == 2
    assert code in chat_server.seen[1].body["messages"][-1]["content"]


async def test_bad_replies_all_the_way_end_in_rejection_not_a_crash(chat_server, app) -> None:
    chat_server.queue(
        recorded("prose_instead_of_json"), recorded("truncated"), recorded("proxy_html_page")
    )
    run = await plan(chat_server, app)
    assert run.outcome is PlanningOutcome.REJECTED
    assert [e.code for a in run.attempts for e in a.errors] == ["planner_reply_malformed"] * 3
    assert run.attempts[0].raw_reply is not None


async def test_fenced_json_is_accepted(chat_server, app) -> None:
    chat_server.queue(recorded("fenced_json"))
    run = await plan(chat_server, app)
    assert run.accepted


@pytest.mark.parametrize("transient", ["overloaded", "rate_limited"])
async def test_transient_http_errors_are_retried_within_one_attempt(
    chat_server, app, transient
) -> None:
    sleeps = Sleeps()
    chat_server.queue(recorded(transient), recorded(transient), recorded("fulfil_4471"))
    run = await plan(chat_server, app, make_planner(chat_server, sleeps))
    assert run.accepted
    assert len(run.attempts) == 1
    assert len(chat_server.seen) == 3
    assert len(sleeps.delays) == 2
    if transient == "rate_limited":
        assert sleeps.delays == [0.0, 0.0]  # Retry-After: 0 is honoured
    else:
        assert 0 <= sleeps.delays[0] <= 0.5  # full jitter under 0.5 * 2**n
        assert 0 <= sleeps.delays[1] <= 1.0


async def test_a_timeout_is_retried(chat_server, app) -> None:
    chat_server.queue(recorded("fulfil_4471", delay=1.0), recorded("fulfil_4471"))
    planner = make_planner(chat_server, timeout=0.2)
    run = await plan(chat_server, app, planner)
    assert run.accepted
    assert len(run.attempts) == 1
    assert len(chat_server.seen) == 2


async def test_an_endpoint_that_stays_down_fails_the_attempt_after_its_retries(
    chat_server, app
) -> None:
    sleeps = Sleeps()
    chat_server.queue(*[recorded("overloaded")] * 3, recorded("fulfil_4471"))
    planner = make_planner(chat_server, sleeps, max_retries=2)
    run = await plan(chat_server, app, planner)

    first, second = run.attempts
    [error] = first.errors
    assert error.code == "planner_unavailable"
    assert "HTTP 503: The server is overloaded" in error.message
    assert "after 3 tries" in error.message
    assert second.accepted  # not final: the next attempt reached the model
    assert len(chat_server.seen) == 4


@pytest.mark.parametrize(
    ("reply", "says"),
    [("bad_key", "HTTP 401: Incorrect API key"), ("vllm_bad_schema", "HTTP 400: response_format")],
)
async def test_a_client_error_ends_the_loop_at_once(chat_server, app, reply, says) -> None:
    chat_server.queue(recorded(reply), recorded("fulfil_4471"))
    run = await plan(chat_server, app)
    assert run.outcome is PlanningOutcome.REJECTED
    [attempt] = run.attempts
    assert says in attempt.errors[0].message
    assert len(chat_server.seen) == 1


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_nothing_listening_is_unavailable_once_not_replanned(app) -> None:
    """The client retries the connection; then the attempt fails for good, and the loop
    does not ask again (re-planning would only repeat every retry)."""
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    sleeps = Sleeps()
    planner = OpenAIPlanner(OpenAIConfig(model="m", base_url=base_url), sleep=sleeps)
    run = await propose_plan(REQUEST, planner, app.catalogue("fulfilment"), max_replans=2)

    assert run.outcome is PlanningOutcome.REJECTED
    [attempt] = run.attempts
    [error] = attempt.errors
    assert error.code == "planner_unavailable"
    assert "cannot reach the endpoint" in error.message
    assert "after 4 tries" in error.message
    assert len(sleeps.delays) == 3  # the client's own retries, once


async def test_an_unreachable_model_is_escalated_after_one_attempt(orchestrator, store) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    config = OpenAIConfig(model="m", base_url=base_url, max_retries=1)
    run = await plan_and_submit(REQUEST, OpenAIPlanner(config, sleep=Sleeps()), orchestrator)

    assert run.outcome is PlanningOutcome.ESCALATED
    [escalation] = await store.escalations()
    [attempt] = escalation.run.attempts
    assert attempt.errors[0].code == "planner_unavailable"
    assert escalation.reason.startswith("no valid plan after 1 attempt(s); last: [planner_una")


async def test_no_api_key_header_without_a_key(chat_server, app) -> None:
    chat_server.queue(recorded("fulfil_4471"))
    config = OpenAIConfig(model="llama3", base_url=chat_server.base_url + "/")
    await propose_plan(REQUEST, OpenAIPlanner(config), app.catalogue("fulfilment"))
    assert "Authorization" not in chat_server.seen[0].headers
    assert chat_server.seen[0].path == "/v1/chat/completions"


def test_configuration_comes_from_the_environment_when_asked() -> None:
    env = {"PIVOTAL_OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "OPENAI_API_KEY": "sk-fallback"}
    config = OpenAIConfig.from_env("qwen", env)
    assert (config.base_url, config.api_key, config.model) == (
        "http://127.0.0.1:8000/v1",
        "sk-fallback",
        "qwen",
    )
    assert "sk-fallback" not in repr(config)
    env["PIVOTAL_OPENAI_API_KEY"] = "sk-pivotal"
    assert OpenAIConfig.from_env("qwen", env).api_key == "sk-pivotal"
    assert OpenAIConfig.from_env("qwen", {"OPENAI_API_KEY": "k"}).base_url.startswith(
        "https://api.openai.com/"
    )
    with pytest.raises(PlannerConfigError, match="no API key"):
        OpenAIConfig.from_env("gpt-4o", {})
    with pytest.raises(PlannerConfigError):
        OpenAIConfig(model=" ", base_url="http://x")
    with pytest.raises(PlannerConfigError):
        OpenAIConfig(model="m", base_url="ftp://x")
