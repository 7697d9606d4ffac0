"""Pivotal for Google ADK agents (the ``pivotal[adk]`` extra, google-adk 2.13 or newer).

- ``SagaAgent`` runs ``Act`` stages (catalogue steps, executed durably by Pivotal) and
  ``Decide`` stages (``LlmAgent`` verdicts) as one saga, with the session state as a view of
  the ledger (``comp:<stage>``, ``saga_status``, ``saga_reason``). A ``Parallel`` stage, or
  an ADK ``ParallelAgent`` of ``Act(...).agent()`` sub-agents, is one parallel group.
- ``AdkPlanner`` is a ``Planner`` over an ``LlmAgent`` whose output schema is the catalogue's
  plan schema, for ``plan_and_submit``.
- ``ScriptedLlm`` is a model that replays a script: agents are tested offline.

Importing ``pivotal`` never imports this package, nor google.adk.
"""

from __future__ import annotations

from pivotal.adk._llm import ScriptedLlm, ScriptExhausted
from pivotal.adk.agent import SagaAgent, saga_id_for
from pivotal.adk.planner import AdkPlanner
from pivotal.adk.stages import (
    COMP_PREFIX,
    SAGA_ABORT,
    SAGA_ID,
    SAGA_REASON,
    SAGA_STATUS,
    Act,
    Decide,
    Parallel,
    StageError,
)

__all__ = [
    "COMP_PREFIX",
    "SAGA_ABORT",
    "SAGA_ID",
    "SAGA_REASON",
    "SAGA_STATUS",
    "Act",
    "AdkPlanner",
    "Decide",
    "Parallel",
    "SagaAgent",
    "ScriptExhausted",
    "ScriptedLlm",
    "StageError",
    "saga_id_for",
]
