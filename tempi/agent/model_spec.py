"""A model as tempi knows it: pi's `Model` shape, without any secret."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tempi.agent.base import PiModel

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")


class ModelCost(PiModel):
    """Dollars per million tokens."""

    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0


class ModelSpec(PiModel):
    id: str
    name: str = ""
    api: str  # anthropic-messages | openai-completions | openai-responses | faux
    provider: str
    base_url: str = ""
    reasoning: bool = False
    input: list[Literal["text", "image"]] = Field(
        default_factory=lambda: list[Literal["text", "image"]](["text"])
    )
    cost: ModelCost = Field(default_factory=ModelCost)
    context_window: int = 128_000
    max_tokens: int = 16_384
    headers: dict[str, str] | None = None
    compat: dict[str, Any] | None = None
    # pi's per-model thinking controls: a level mapped to None is unsupported, a string
    # is the provider's own value for that level; levels not listed use the default.
    thinking_level_map: dict[str, str | None] | None = None

    @property
    def supports_images(self) -> bool:
        return "image" in self.input
