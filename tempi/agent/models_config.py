"""The models.json schema (pi's format); merging it into the built-ins is
`tempi.agent.model_registry`'s job, reading the file `tempi.config.models_json`'s."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.model_spec import ThinkingLevel


class ModelsJsonCost(PiModel):
    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0


class ModelOverride(PiModel):
    """Changes to one built-in model (`modelOverrides`); absent fields stay as built in."""

    name: str | None = None
    reasoning: bool | None = None
    thinking_level_map: dict[ThinkingLevel, str | None] | None = None
    input: list[Literal["text", "image"]] | None = None
    cost: ModelsJsonCost | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    headers: dict[str, str] | None = None
    compat: dict[str, Any] | None = None


class ModelDefinition(ModelOverride):
    """One entry of a provider's `models` list; only `id` is required."""

    id: str = Field(min_length=1)
    api: str | None = None
    base_url: str | None = None


class ProviderConfig(PiModel):
    name: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api: str | None = None
    headers: dict[str, str] | None = None
    compat: dict[str, Any] | None = None
    auth_header: bool | None = None
    models: list[ModelDefinition] = Field(default_factory=list)
    model_overrides: dict[str, ModelOverride] = Field(default_factory=dict)


class ModelsConfig(PiModel):
    providers: dict[str, ProviderConfig]


class ModelsConfigError(ValueError):
    """models.json parses but asks for something impossible (message names the provider)."""
