"""A planner over any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, the llama.cpp
server, Ollama), with the plan's JSON Schema as structured output."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from pivotal.declarations.plan import ActorType, strict_json
from pivotal.errors import PlanParseError
from pivotal.planning.base import PlannerInfo, PlannerTurn, Proposal
from pivotal.planning.errors import (
    PlannerConfigError,
    PlannerError,
    PlannerRefused,
    PlannerReplyMalformed,
    PlannerUnavailable,
)
from pivotal.planning.prompt import PROMPT_VERSION, messages, response_format

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)
_SNIPPET = 300


@dataclass(frozen=True)
class OpenAIConfig:
    """Where and how to reach the model."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0  # seconds per HTTP request
    max_retries: int = 3  # further tries after a timeout or a transient HTTP error
    backoff: float = 0.5  # first retry delay; doubles each time, with full jitter
    max_backoff: float = 8.0
    temperature: float | None = None  # None leaves the server's default
    strict_schema: bool = False  # OpenAI's strict mode needs every field required

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise PlannerConfigError("the model name is empty; use --planner openai:MODEL")
        if not self.base_url.startswith(("http://", "https://")):
            raise PlannerConfigError(f"base URL {self.base_url!r} must start with http(s)://")
        if self.timeout <= 0 or self.max_retries < 0 or self.backoff < 0:
            raise PlannerConfigError("timeout must be positive; retries and backoff not negative")

    @classmethod
    def from_env(
        cls, model: str, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> OpenAIConfig:
        """Read PIVOTAL_OPENAI_BASE_URL and PIVOTAL_OPENAI_API_KEY (or OPENAI_API_KEY)."""
        env = os.environ if env is None else env
        base_url = env.get("PIVOTAL_OPENAI_BASE_URL") or DEFAULT_BASE_URL
        api_key = env.get("PIVOTAL_OPENAI_API_KEY") or env.get("OPENAI_API_KEY") or None
        if api_key is None and base_url.rstrip("/") == DEFAULT_BASE_URL:
            raise PlannerConfigError(
                "no API key: set PIVOTAL_OPENAI_API_KEY or OPENAI_API_KEY, or point "
                "PIVOTAL_OPENAI_BASE_URL at a local server"
            )
        return cls(model=model, base_url=base_url, api_key=api_key, **overrides)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


class OpenAIPlanner:
    """Asks a chat model for a plan; every failure to get one is a ``PlannerError``.

    Timeouts, connection failures and transient statuses (429, 5xx...) are retried with
    backoff inside one attempt. An endpoint that still cannot be connected to after those
    retries, and other HTTP errors, end the loop (asking again cannot help); a reply that is
    not a JSON object is a failed attempt the model may fix on the next.
    """

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.info = PlannerInfo(
            actor_type=ActorType.AGENT,
            actor_id=f"openai:{config.model}",
            model=config.model,
            prompt_version=PROMPT_VERSION,
        )
        self._sleep = sleep
        self._rng = rng or random.Random()

    def request_body(self, turn: PlannerTurn) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages(turn, self.info.actor_id),
            "response_format": response_format(turn, strict=self.config.strict_schema),
        }
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        return body

    async def propose(self, turn: PlannerTurn) -> Proposal:
        payload = await self._post(self.request_body(turn))
        return self._proposal(payload)

    # -- HTTP ---------------------------------------------------------------------------

    async def _post(self, body: dict[str, Any]) -> Any:
        cfg = self.config
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        problem = ""
        unreachable = False  # the last try could not even connect
        async with httpx.AsyncClient(timeout=cfg.timeout, headers=headers) as client:
            for attempt in range(cfg.max_retries + 1):
                wait: float | None = None
                unreachable = False
                try:
                    response = await client.post(cfg.url, json=body)
                except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                    problem = f"cannot reach the endpoint ({type(exc).__name__}: {exc})"
                    unreachable = True
                except httpx.TimeoutException:
                    problem = f"no reply within {cfg.timeout:g}s"
                except httpx.TransportError as exc:
                    problem = f"cannot reach the endpoint ({type(exc).__name__}: {exc})"
                else:
                    if response.status_code < 400:
                        return self._json(response)
                    problem = f"HTTP {response.status_code}: {_error_detail(response)}"
                    if response.status_code not in RETRY_STATUSES:
                        raise PlannerError(
                            f"{cfg.url} answered {problem}", final=True, by=self.info
                        )
                    wait = _retry_after(response)
                if attempt < cfg.max_retries:
                    await self._sleep(wait if wait is not None else self._backoff(attempt))
        # An endpoint nobody answers on stays so for the next attempt too: re-planning would
        # only repeat every retry, so the loop is told to stop. One that answered (busy,
        # overloaded, slow) may recover, and the next attempt asks it again.
        raise PlannerUnavailable(
            f"{cfg.url}: {problem} (gave up after {cfg.max_retries + 1} tries)",
            final=unreachable,
            by=self.info,
        )

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.config.max_backoff, self.config.backoff * 2**attempt)
        return self._rng.uniform(0, ceiling)

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise PlannerReplyMalformed(
                f"the endpoint's reply is not JSON: {_snip(response.text)!r}",
                raw=_snip(response.text, 4000),
                by=self.info,
            ) from None

    # -- the reply ----------------------------------------------------------------------

    def _proposal(self, payload: Any) -> Proposal:
        choices = payload.get("choices") if isinstance(payload, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise PlannerReplyMalformed(
                f"the reply has no choices[0].message: {_snip(json.dumps(payload))!r}",
                by=self.info,
            )
        served = payload.get("model")
        by = self.info
        if isinstance(served, str) and served and served != by.model:
            by = by.model_copy(update={"model": served})
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise PlannerRefused(f"the model refused: {_snip(refusal)}", raw=refusal, by=by)
        content = message.get("content")
        truncated = choice.get("finish_reason") == "length" if choice else False
        cut = " (the reply was cut off at the token limit)" if truncated else ""
        if not isinstance(content, str) or not content.strip():
            raise PlannerReplyMalformed(f"the reply has no content{cut}", by=by)
        text = content.strip()
        fenced = _FENCE.match(text)
        try:
            data = strict_json(fenced.group(1) if fenced else text)
        except PlanParseError as exc:  # not JSON, or a key given twice
            raise PlannerReplyMalformed(
                f"the model's reply is not valid JSON for a plan{cut} ({exc}): {_snip(text)!r}",
                raw=content,
                by=by,
            ) from None
        if not isinstance(data, dict):
            raise PlannerReplyMalformed(
                f"the model's reply is JSON but not an object: {_snip(text)!r}", raw=content, by=by
            )
        rationale = data.get("rationale")
        return Proposal(
            plan=data,
            rationale=rationale if isinstance(rationale, str) else "",
            by=by,
            raw=content,
        )


def _snip(text: str, limit: int = _SNIPPET) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return _snip(response.text.strip()) or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return _snip(error["message"])
    if isinstance(error, str):
        return _snip(error)
    if isinstance(body, dict) and isinstance(body.get("message"), str):  # vLLM's shape
        return _snip(body["message"])
    return _snip(json.dumps(body))


def _retry_after(response: httpx.Response, cap: float = 30.0) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return min(cap, max(0.0, float(value))) if value else None
    except ValueError:
        return None
