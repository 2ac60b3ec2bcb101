"""`generationConfig.thinkingConfig` for Gemini, as pi's google and google-vertex providers
build it.

Gemini 3 Pro/Flash (and Gemma 4 on the Gemini API) take a `thinkingLevel`; the others a
`thinkingBudget` in tokens (-1: the model decides). Thinking off is `thinkingBudget: 0`,
except where a model cannot stop thinking: Gemini 3 Pro thinks LOW, Gemini 3 Flash and
Gemma 4 MINIMAL, without showing the thoughts.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.thinking_levels import clamp_level

GoogleApi = Literal["google-generative-ai", "google-vertex"]
Effort = Literal["minimal", "low", "medium", "high"]

_GEMINI_3_PRO = re.compile(r"gemini-3(?:\.\d+)?-pro")
_GEMINI_3_FLASH = re.compile(r"gemini-3(?:\.\d+)?-flash")
_GEMMA_4 = re.compile(r"gemma-?4")

# pi's budgets per model family; any other model decides for itself (-1).
_BUDGETS: dict[str, dict[Effort, int]] = {
    "2.5-pro": {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768},
    "2.5-flash-lite": {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576},
    "2.5-flash": {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576},
}
_DYNAMIC_BUDGET = -1


def thinking_config(model: ModelSpec, level: ThinkingLevel, api: GoogleApi) -> dict[str, Any] | None:
    """The thinkingConfig to send, or None for a model that cannot think."""
    if not model.reasoning:
        return None
    if level == "off":
        return _disabled(model, api)
    clamped = clamp_level(model, level)
    # pi asks a model that can only be off (no level left) to think high; xhigh is high.
    effort: Effort = "high" if clamped == "off" or clamped == "xhigh" else clamped
    if _uses_levels(model, api):
        return {"includeThoughts": True, "thinkingLevel": _level(model, effort)}
    return {"includeThoughts": True, "thinkingBudget": _budget(model, effort, api)}


def _uses_levels(model: ModelSpec, api: GoogleApi) -> bool:
    model_id = model.id.lower()
    if _GEMINI_3_PRO.search(model_id) or _GEMINI_3_FLASH.search(model_id):
        return True
    # pi's Vertex provider has no Gemma 4 case.
    return api == "google-generative-ai" and bool(_GEMMA_4.search(model_id))


def _disabled(model: ModelSpec, api: GoogleApi) -> dict[str, Any]:
    model_id = model.id.lower()
    if _GEMINI_3_PRO.search(model_id):
        return {"thinkingLevel": "LOW"}
    if _GEMINI_3_FLASH.search(model_id) or (api == "google-generative-ai" and _GEMMA_4.search(model_id)):
        return {"thinkingLevel": "MINIMAL"}
    return {"thinkingBudget": 0}


def _level(model: ModelSpec, effort: Effort) -> str:
    model_id = model.id.lower()
    if _GEMINI_3_PRO.search(model_id):
        return "LOW" if effort in ("minimal", "low") else "HIGH"
    if _GEMMA_4.search(model_id):
        return "MINIMAL" if effort in ("minimal", "low") else "HIGH"
    return effort.upper()


def _budget(model: ModelSpec, effort: Effort, api: GoogleApi) -> int:
    for family, budgets in _BUDGETS.items():
        # pi's Vertex provider gives Flash-Lite the Flash budgets.
        if family == "2.5-flash-lite" and api == "google-vertex":
            continue
        if family in model.id:
            return budgets[effort]
    return _DYNAMIC_BUDGET
