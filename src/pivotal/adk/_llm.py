"""A scripted stand-in for a model: ADK agents run offline, with no credentials."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from google.adk.models import LlmCapabilities
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field, PrivateAttr

from pivotal.errors import PivotalError

Reply = str | dict[str, Any] | list[Any] | Callable[[LlmRequest], "str | dict[str, Any]"]
"""One scripted answer: text, data sent as JSON text, or a function of the request."""


class ScriptExhausted(PivotalError):
    """The scripted model was asked more often than its script has answers."""

    code = "adk_script_exhausted"


class ScriptedLlm(BaseLlm):
    """A ``BaseLlm`` that answers each call with the next reply of its script.

    Use it to test an ADK agent (or a Pivotal ``SagaAgent``) without a model, network or
    credentials. Every request it receives is kept in ``requests`` so a test can check what
    the agent was told (the instruction, the errors of an earlier attempt).
    """

    model: str = "scripted"
    replies: list[Any] = Field(default_factory=list)
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    @classmethod
    def of(cls, *replies: Reply, model: str = "scripted") -> ScriptedLlm:
        """A scripted model answering with ``replies`` in order."""
        return cls(model=model, replies=list(replies))

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    @property
    def requests(self) -> Sequence[LlmRequest]:
        return tuple(self._requests)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        n = len(self._requests)
        self._requests.append(llm_request)
        if n >= len(self.replies):
            raise ScriptExhausted(
                f"the scripted model {self.model!r} has {len(self.replies)} replies; "
                f"call {n + 1} has none"
            )
        reply = self.replies[n]
        if callable(reply):
            reply = reply(llm_request)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]),
            partial=False,
            turn_complete=True,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=0, candidates_token_count=0, total_token_count=0
            ),
        )
