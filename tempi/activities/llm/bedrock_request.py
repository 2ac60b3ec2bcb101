"""The ConverseStream request body for `bedrock-converse-stream`, in the shape pi sends.

pi (amazon-bedrock.js) decides several things from the model's id and name, since an
application inference profile's ARN hides the model: whether it is a Claude model (thinking
fields, signatures on replayed reasoning), whether it takes cache points, and whether its
thinking is adaptive. The same tests are made here, on the same candidates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tempi.activities.llm.contract import StreamOptions, output_token_limit
from tempi.activities.llm.conversation_cache import CONVERSATIONS, ListConverter, append_tool_result
from tempi.activities.llm.errors import ProviderError
from tempi.activities.llm.thinking import (
    MIN_OUTPUT_TOKENS,
    THINKING_BUDGETS,
    THINKING_DISPLAY,
    effective_level,
)
from tempi.activities.llm.transform import ConversationRepair, ToolIdFormat
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec, ThinkingLevel

API = "bedrock-converse-stream"
# pi's normalizeToolCallId for Bedrock: [A-Za-z0-9_-], at most 64 characters.
BEDROCK_TOOL_IDS = ToolIdFormat(max_length=64)
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
_IMAGE_FORMATS = {
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/png": "png",
    "image/gif": "gif",
    "image/webp": "webp",
}
_SEPARATORS = re.compile(r"[\s_.:]+")


def _candidates(model: ModelSpec) -> list[str]:
    values = [model.id, model.name] if model.name else [model.id]
    return [form for value in values for form in (value.lower(), _SEPARATORS.sub("-", value.lower()))]


def is_claude(model: ModelSpec) -> bool:
    model_id, name = model.id.lower(), model.name.lower()
    return "anthropic.claude" in model_id or "anthropic/claude" in model_id or "claude" in name


def uses_adaptive_thinking(model: ModelSpec) -> bool:
    return any(marker in c for c in _candidates(model) for marker in ("opus-4-6", "opus-4-7", "sonnet-4-6"))


def supports_cache_points(model: ModelSpec, env: Mapping[str, str]) -> bool:
    """Claude 4.x, 3.7 Sonnet and 3.5 Haiku; for an ARN that names no Claude model,
    AWS_BEDROCK_FORCE_CACHE=1 (Nova caches by itself)."""
    candidates = _candidates(model)
    if not any("claude" in c for c in candidates):
        return env.get("AWS_BEDROCK_FORCE_CACHE") == "1"
    return any("-4-" in c or "claude-3-7-sonnet" in c or "claude-3-5-haiku" in c for c in candidates)


def cache_point(env: Mapping[str, str]) -> dict[str, Any]:
    # PI_CACHE_RETENTION=long asks for the one-hour cache, as in pi.
    ttl = {"ttl": "1h"} if env.get("PI_CACHE_RETENTION") == "long" else {}
    return {"cachePoint": {"type": "default", **ttl}}


def configured_region(env: Mapping[str, str]) -> str | None:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def _is_govcloud(model: ModelSpec, env: Mapping[str, str]) -> bool:
    region = (configured_region(env) or "").lower()
    model_id = model.id.lower()
    return region.startswith("us-gov-") or model_id.startswith(("us-gov.", "arn:aws-us-gov:"))


def _adaptive_effort(model: ModelSpec, level: ThinkingLevel) -> str:
    if level == "xhigh" and any("opus-4-7" in c for c in _candidates(model)):
        return "xhigh"
    mapped = (model.thinking_level_map or {}).get(level)
    if mapped:
        return mapped
    return {"minimal": "low", "low": "low", "medium": "medium"}.get(level, "high")


def thinking_fields(
    model: ModelSpec, level: ThinkingLevel, max_tokens: int, env: Mapping[str, str]
) -> tuple[int, dict[str, Any] | None]:
    """(maxTokens, additionalModelRequestFields): Claude's thinking, as pi asks for it on
    Bedrock. Other models' reasoning is not requested (pi sends nothing for them)."""
    chosen = effective_level(model, level)
    if chosen is None or not is_claude(model):
        return max_tokens, None
    # GovCloud's Converse schema does not know `display` yet.
    display = {} if _is_govcloud(model, env) else {"display": THINKING_DISPLAY}
    if uses_adaptive_thinking(model):
        return max_tokens, {
            "thinking": {"type": "adaptive", **display},
            "output_config": {"effort": _adaptive_effort(model, chosen)},
        }
    # Claude has no budget above high.
    budget = THINKING_BUDGETS["high" if chosen == "xhigh" else chosen]
    total = min(max_tokens + budget, model.max_tokens)
    if total <= budget:
        budget = max(0, total - MIN_OUTPUT_TOKENS)
    fields = {
        "thinking": {"type": "enabled", "budget_tokens": budget, **display},
        "anthropic_beta": [INTERLEAVED_THINKING_BETA],
    }
    return total, fields


def build_request(
    model: ModelSpec, context: LlmContext, options: StreamOptions, env: Mapping[str, str]
) -> dict[str, Any]:
    """The body pi sends; `env` is read for the cache and GovCloud switches."""
    caching = supports_cache_points(model, env)
    max_tokens, additional = thinking_fields(
        model, options.thinking_level, output_token_limit(model, options), env
    )
    body: dict[str, Any] = {
        "messages": CONVERSATIONS.convert(
            (API, options.session_id),
            context.messages,
            model,
            lambda: (ConversationRepair(model, BEDROCK_TOOL_IDS), BedrockConverter(model, caching, env)),
        )
    }
    if context.system_prompt:
        body["system"] = [{"text": context.system_prompt}, *([cache_point(env)] if caching else [])]
    inference: dict[str, Any] = {"maxTokens": max_tokens}
    if options.temperature is not None:
        inference["temperature"] = options.temperature
    body["inferenceConfig"] = inference
    if context.tools:
        body["toolConfig"] = {"tools": convert_tools(context.tools)}
    if additional is not None:
        body["additionalModelRequestFields"] = additional
    return body


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "toolSpec": {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": {"json": tool.parameters},
            }
        }
        for tool in tools
    ]


class BedrockConverter(ListConverter):
    """Repaired messages to Converse messages, one at a time (see `conversation_cache`)."""

    def __init__(self, model: ModelSpec, caching: bool, env: Mapping[str, str]) -> None:
        super().__init__()
        self.signatures = is_claude(model)  # only Claude takes a signature on reasoning
        self.cache_point = cache_point(env) if caching else None

    def add(self, message: LlmMessage) -> None:
        converted = self.converted
        if isinstance(message, UserMessage):
            content = message.content
            blocks = [{"text": content}] if isinstance(content, str) else [_user_block(b) for b in content]
            converted.append({"role": "user", "content": blocks})
        elif isinstance(message, AssistantMessage):
            blocks = self._assistant_blocks(message)
            if blocks:
                converted.append({"role": "assistant", "content": blocks})
        else:
            append_tool_result(converted, _tool_result(message), lambda content: "toolResult" in content[0])

    def result(self) -> list[dict[str, Any]]:
        messages = self.converted
        if self.cache_point is None or not messages or messages[-1]["role"] != "user":
            return list(messages)
        # The mark goes on a copy: the others are shared with the next call.
        last = messages[-1]
        return [*messages[:-1], {**last, "content": [*last["content"], self.cache_point]}]

    def _assistant_blocks(self, message: AssistantMessage) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                if block.text.strip():
                    blocks.append({"text": block.text})
            elif isinstance(block, ThinkingContent):
                if block.redacted or not block.thinking.strip():
                    continue
                if not self.signatures:
                    blocks.append({"reasoningContent": {"reasoningText": {"text": block.thinking}}})
                elif block.thinking_signature and block.thinking_signature.strip():
                    reasoning = {"text": block.thinking, "signature": block.thinking_signature}
                    blocks.append({"reasoningContent": {"reasoningText": reasoning}})
                else:
                    # Reasoning cut off before its signature cannot be replayed as reasoning.
                    blocks.append({"text": block.thinking})
            else:
                blocks.append(
                    {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.arguments}}
                )
        return blocks


def _user_block(block: UserBlock) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"text": block.text}
    return _image_block(block)


def _image_block(image: ImageContent) -> dict[str, Any]:
    image_format = _IMAGE_FORMATS.get(image.mime_type)
    if image_format is None:
        raise ProviderError(f"Amazon Bedrock takes JPEG, PNG, GIF or WebP images, not {image.mime_type}")
    # The SDK sends an image's bytes base64-encoded, which they are already.
    return {"image": {"format": image_format, "source": {"bytes": image.data}}}


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    return {
        "toolResult": {
            "toolUseId": message.tool_call_id,
            "content": [_user_block(block) for block in message.content],
            "status": "error" if message.is_error else "success",
        }
    }
