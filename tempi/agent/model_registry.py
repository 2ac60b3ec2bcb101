"""The models a run can choose from: the built-ins with models.json applied.

Pure: reading models.json and resolving API keys happen in `tempi.config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tempi.agent.model_catalog import BUILTIN_MODELS
from tempi.agent.model_spec import ModelCost, ModelSpec, ThinkingLevel
from tempi.agent.models_config import (
    ModelDefinition,
    ModelsConfig,
    ModelsConfigError,
    ModelsJsonCost,
    ProviderConfig,
)


@dataclass(frozen=True)
class ProviderRequestConfig:
    """Unresolved auth settings from models.json (`!command`, env var name or literal).

    May hold a literal secret: it stays in the worker or CLI process, never in a workflow.
    """

    api_key: str | None = None
    headers: dict[str, str] | None = None
    auth_header: bool = False


@dataclass
class ModelRegistry:
    models: list[ModelSpec]
    request_configs: dict[str, ProviderRequestConfig] = field(default_factory=dict)
    # Unresolved per-model headers, keyed by "provider/modelId".
    model_headers: dict[str, dict[str, str]] = field(default_factory=dict)

    def find(self, provider: str, model_id: str) -> ModelSpec | None:
        for model in self.models:
            if model.provider == provider and model.id == model_id:
                return model
        return None

    def providers(self) -> list[str]:
        return list(dict.fromkeys(model.provider for model in self.models))

    def models_for(self, provider: str) -> list[ModelSpec]:
        return [model for model in self.models if model.provider == provider]

    def request_config(self, provider: str) -> ProviderRequestConfig | None:
        return self.request_configs.get(provider)

    def header_config_for(self, model: ModelSpec) -> dict[str, str] | None:
        return self.model_headers.get(f"{model.provider}/{model.id}")


def builtin_registry() -> ModelRegistry:
    return ModelRegistry(models=list(BUILTIN_MODELS))


def build_registry(config: ModelsConfig | None) -> ModelRegistry:
    """Built-in models with models.json applied: provider overrides, per-model
    overrides, then custom models upserted by (provider, id)."""
    if config is None:
        return builtin_registry()
    _check_config(config)

    builtin_providers = {model.provider for model in BUILTIN_MODELS}
    models: list[ModelSpec] = []
    for builtin in BUILTIN_MODELS:
        provider_config = config.providers.get(builtin.provider)
        models.append(_override_builtin(builtin, provider_config) if provider_config else builtin)

    request_configs: dict[str, ProviderRequestConfig] = {}
    model_headers: dict[str, dict[str, str]] = {}
    for provider, provider_config in config.providers.items():
        if provider_config.api_key or provider_config.headers or provider_config.auth_header:
            request_configs[provider] = ProviderRequestConfig(
                api_key=provider_config.api_key,
                headers=provider_config.headers,
                auth_header=bool(provider_config.auth_header),
            )
        if provider in builtin_providers:
            for model_id, override in provider_config.model_overrides.items():
                if override.headers:
                    model_headers[f"{provider}/{model_id}"] = override.headers
        for definition in provider_config.models:
            custom = _custom_model(provider, provider_config, definition)
            if definition.headers:
                model_headers[f"{provider}/{definition.id}"] = definition.headers
            index = next(
                (i for i, m in enumerate(models) if m.provider == provider and m.id == custom.id), None
            )
            if index is None:
                models.append(custom)
            else:
                models[index] = custom
    return ModelRegistry(models=models, request_configs=request_configs, model_headers=model_headers)


def _provider_defaults(provider: str) -> tuple[str, str] | None:
    """(api, baseUrl) a provider's models get when models.json leaves them out: those of
    its first built-in model, as pi does."""
    for model in BUILTIN_MODELS:
        if model.provider == provider:
            return model.api, model.base_url
    return None


def _check_config(config: ModelsConfig) -> None:
    for provider, provider_config in config.providers.items():
        known = _provider_defaults(provider) is not None
        if not provider_config.models:
            if not (
                provider_config.base_url
                or provider_config.headers
                or provider_config.compat
                or provider_config.model_overrides
                or provider_config.api_key
            ):
                raise ModelsConfigError(
                    f'provider "{provider}" sets nothing: give it "models", or override '
                    '"baseUrl", "apiKey", "headers", "compat" or "modelOverrides"'
                )
            continue
        if not known:
            if not provider_config.base_url:
                raise ModelsConfigError(f'provider "{provider}" defines models but has no "baseUrl"')
            if not provider_config.api_key:
                raise ModelsConfigError(f'provider "{provider}" defines models but has no "apiKey"')
        for definition in provider_config.models:
            if not (definition.api or provider_config.api or known):
                raise ModelsConfigError(
                    f'provider "{provider}", model "{definition.id}": no "api"; '
                    "set it on the provider or on the model"
                )
            if definition.context_window is not None and definition.context_window <= 0:
                raise ModelsConfigError(
                    f'provider "{provider}", model "{definition.id}": "contextWindow" must be positive'
                )
            if definition.max_tokens is not None and definition.max_tokens <= 0:
                raise ModelsConfigError(
                    f'provider "{provider}", model "{definition.id}": "maxTokens" must be positive'
                )


def _merge_compat(base: dict[str, Any] | None, override: dict[str, Any] | None) -> dict[str, Any] | None:
    if not override:
        return base
    merged = {**(base or {}), **override}
    for nested in ("openRouterRouting", "vercelGatewayRouting"):
        if isinstance((base or {}).get(nested), dict) and isinstance(override.get(nested), dict):
            merged[nested] = {**(base or {})[nested], **override[nested]}
    return merged


def _override_builtin(model: ModelSpec, provider_config: ProviderConfig) -> ModelSpec:
    updates: dict[str, Any] = {}
    if provider_config.base_url:
        updates["base_url"] = provider_config.base_url
    if provider_config.compat:
        updates["compat"] = _merge_compat(model.compat, provider_config.compat)
    override = provider_config.model_overrides.get(model.id)
    if override is not None:
        for name in ("name", "reasoning", "input", "context_window", "max_tokens"):
            value = getattr(override, name)
            if value is not None:
                updates[name] = value
        if override.thinking_level_map is not None:
            updates["thinking_level_map"] = {
                **(model.thinking_level_map or {}),
                **(_level_map(override.thinking_level_map) or {}),
            }
        if override.cost is not None:
            given = override.cost.model_fields_set
            updates["cost"] = model.cost.model_copy(
                update={name: getattr(override.cost, name) for name in given}
            )
        if override.compat:
            updates["compat"] = _merge_compat(updates.get("compat", model.compat), override.compat)
    return model.model_copy(update=updates) if updates else model


def _custom_model(provider: str, provider_config: ProviderConfig, definition: ModelDefinition) -> ModelSpec:
    defaults = _provider_defaults(provider)
    api = definition.api or provider_config.api or (defaults[0] if defaults else "")
    base_url = definition.base_url or provider_config.base_url or (defaults[1] if defaults else "")
    cost = definition.cost or ModelsJsonCost()
    return ModelSpec(
        id=definition.id,
        name=definition.name or definition.id,
        api=api,
        provider=provider,
        base_url=base_url,
        reasoning=bool(definition.reasoning),
        input=definition.input or ["text"],
        cost=ModelCost(
            input=cost.input, output=cost.output, cache_read=cost.cache_read, cache_write=cost.cache_write
        ),
        context_window=definition.context_window or 128_000,
        max_tokens=definition.max_tokens or 16_384,
        compat=_merge_compat(provider_config.compat, definition.compat),
        thinking_level_map=_level_map(definition.thinking_level_map),
    )


def _level_map(levels: dict[ThinkingLevel, str | None] | None) -> dict[str, str | None] | None:
    return None if levels is None else {str(level): value for level, value in levels.items()}
