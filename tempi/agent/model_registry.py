"""Which models exist and how a user's words pick one.

Pure: the built-in table, the models.json schema (pi's format), merging the two, and the
`--provider` / `--model` rules. Reading files and resolving API keys happen in
`tempi.config`; whether a provider has a key is passed in as a predicate.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.model_spec import THINKING_LEVELS, ModelCost, ModelSpec, ThinkingLevel

# Every provider and model pi knows, as published in pi-ai's generated model list;
# regenerate with scripts/pi_catalog.py for a new pi version.
CATALOG_PATH = Path(__file__).with_name("pi_catalog.json")

FAUX_PROVIDER = "faux"
FAUX_MODEL_ID = "faux-model"

# The wire APIs tempi can call. The catalog holds models of other APIs too: they are
# listed, but choosing one is an error that names the API.
SUPPORTED_APIS: tuple[str, ...] = (
    "anthropic-messages",
    "openai-completions",
    "openai-responses",
    "azure-openai-responses",
    "openai-codex-responses",
    "mistral-conversations",
    "google-generative-ai",
    "google-vertex",
    "bedrock-converse-stream",
    "faux",
)

# pi 0.73.1's defaultModelPerProvider (model-resolver.js): each provider's default model, and
# the order providers are tried in when the user names no model (first one with a key wins).
DEFAULT_MODEL_PER_PROVIDER: dict[str, str] = {
    "amazon-bedrock": "us.anthropic.claude-opus-4-6-v1",
    "anthropic": "claude-opus-4-7",
    "openai": "gpt-5.4",
    "azure-openai-responses": "gpt-5.4",
    "openai-codex": "gpt-5.5",
    "deepseek": "deepseek-v4-pro",
    "google": "gemini-3.1-pro-preview",
    "google-vertex": "gemini-3.1-pro-preview",
    "github-copilot": "gpt-5.4",
    "openrouter": "moonshotai/kimi-k2.6",
    "vercel-ai-gateway": "zai/glm-5.1",
    "xai": "grok-4.20-0309-reasoning",
    "groq": "openai/gpt-oss-120b",
    "cerebras": "zai-glm-4.7",
    "zai": "glm-5.1",
    "mistral": "devstral-medium-latest",
    "minimax": "MiniMax-M2.7",
    "minimax-cn": "MiniMax-M2.7",
    "moonshotai": "kimi-k2.6",
    "moonshotai-cn": "kimi-k2.6",
    "huggingface": "moonshotai/Kimi-K2.6",
    "fireworks": "accounts/fireworks/models/kimi-k2p6",
    "opencode": "kimi-k2.6",
    "opencode-go": "kimi-k2.6",
    "kimi-coding": "kimi-for-coding",
    "cloudflare-workers-ai": "@cf/moonshotai/kimi-k2.6",
    "cloudflare-ai-gateway": "workers-ai/@cf/moonshotai/kimi-k2.6",
    "xiaomi": "mimo-v2.5-pro",
    "xiaomi-token-plan-cn": "mimo-v2.5-pro",
    "xiaomi-token-plan-ams": "mimo-v2.5-pro",
    "xiaomi-token-plan-sgp": "mimo-v2.5-pro",
}


def _load_catalog(path: Path) -> tuple[str, tuple[ModelSpec, ...]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    models = tuple(
        ModelSpec.model_validate(model)
        for provider_models in data["providers"].values()
        for model in provider_models
    )
    return str(data["version"]), models


CATALOG_VERSION, CATALOG_MODELS = _load_catalog(CATALOG_PATH)
CATALOG_PROVIDERS: tuple[str, ...] = tuple(dict.fromkeys(m.provider for m in CATALOG_MODELS))
# Whose model a name matching several providers' models picks first (tempi's choice: pi's
# own matching would pick amazon-bedrock's, the first provider of its catalog).
_PREFERRED_IN_MATCHES = ("anthropic", "openai")
# _provider_rank's order, looked up for every model a name matches.
_PROVIDER_RANKS: dict[str, tuple[int, int]] = {
    **{p: (2, i) for i, p in enumerate(CATALOG_PROVIDERS)},
    **{p: (0, i) for i, p in enumerate(_PREFERRED_IN_MATCHES)},
}


def _faux(model_id: str, name: str, *, reasoning: bool) -> ModelSpec:
    return ModelSpec(
        id=model_id, name=name, api="faux", provider=FAUX_PROVIDER, base_url="", reasoning=reasoning,
        input=["text", "image"], cost=ModelCost(), context_window=128_000, max_tokens=16_384,
    )  # fmt: skip


BUILTIN_MODELS: tuple[ModelSpec, ...] = (
    *CATALOG_MODELS,
    # Answers from a script instead of a network; for tests and demos.
    _faux(FAUX_MODEL_ID, "Faux (scripted)", reasoning=True),
    # Offline demo: looks around the working directory and reports, with no API key.
    _faux("demo", "Offline demo", reasoning=False),
)


def api_supported(api: str) -> bool:
    return api in SUPPORTED_APIS


def _provider_rank(provider: str) -> tuple[int, int]:
    """Which provider's model wins when one name matches models of several: anthropic
    and openai first, then providers only models.json defines, then pi's catalog order."""
    return _PROVIDER_RANKS.get(provider, (1, 0))


# --- models.json schema (pi's format) -------------------------------------------------


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


class ModelSelectionError(ValueError):
    """The user's --provider / --model words do not pick exactly one model."""


# --- the registry ----------------------------------------------------------------------


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


# --- choosing a model ---------------------------------------------------------------


class ModelSelection(PiModel):
    model: ModelSpec
    # Set only when the user asked for one with a `:level` suffix.
    thinking_level: ThinkingLevel | None = None
    # Something the user should be told, e.g. that the settings' default was not found.
    warning: str | None = None


_DATED_ID = re.compile(r"-\d{8}$")


def _is_alias(model_id: str) -> bool:
    return model_id.endswith("-latest") or not _DATED_ID.search(model_id)


def _collapse_catalog_duplicates(models: list[ModelSpec]) -> list[ModelSpec]:
    """Many catalog providers serve the same model id (openai, azure, copilot, gateways...):
    of those keep only the best-ranked provider's. Providers only models.json defines are
    the user's own and are never collapsed."""
    catalog = [m for m in models if m.provider in CATALOG_PROVIDERS]
    own = [m for m in models if m.provider not in CATALOG_PROVIDERS]
    best = [min(catalog, key=lambda m: _provider_rank(m.provider))] if catalog else []
    return best + own


def _exact_match(reference: str, models: list[ModelSpec]) -> ModelSpec | None:
    """`provider/id` or a bare id naming exactly one model (case-insensitive)."""
    wanted = reference.strip().lower()
    if not wanted:
        return None
    canonical = [m for m in models if f"{m.provider}/{m.id}".lower() == wanted]
    if canonical:
        return canonical[0] if len(canonical) == 1 else None
    by_id = _collapse_catalog_duplicates([m for m in models if m.id.lower() == wanted])
    if len(by_id) > 1:
        names = ", ".join(f"{m.provider}/{m.id}" for m in by_id)
        raise ModelSelectionError(f'"{reference}" names several models ({names}); add the provider')
    return by_id[0] if by_id else None


def _fuzzy_match(pattern: str, models: list[ModelSpec]) -> ModelSpec | None:
    """A model whose id or name contains the pattern; among several, those of the
    best-ranked provider, then an alias (no date suffix), then the id that sorts
    highest, i.e. the newest."""
    needle = pattern.strip().lower()
    if not needle:
        return None
    matches = [m for m in models if needle in m.id.lower() or needle in m.name.lower()]
    if not matches:
        return None
    best_rank = min(_provider_rank(m.provider) for m in matches)
    matches = [m for m in matches if _provider_rank(m.provider) == best_rank]
    aliases = [m for m in matches if _is_alias(m.id)]
    pool = aliases or matches
    return max(pool, key=lambda m: m.id)


def _match_pattern(pattern: str, models: list[ModelSpec]) -> ModelSelection | None:
    """Match `pattern`, or `pattern:level` with a thinking level; ids may contain colons,
    so the whole pattern is tried before any suffix is split off."""
    found = _exact_match(pattern, models) or _fuzzy_match(pattern, models)
    if found is not None:
        return ModelSelection(model=found)
    prefix, colon, suffix = pattern.rpartition(":")
    if not colon:
        return None
    inner = _match_pattern(prefix, models)
    if inner is None:
        return None
    if suffix not in THINKING_LEVELS:
        raise ModelSelectionError(
            f'Unknown thinking level "{suffix}" in "{pattern}". Valid levels: {", ".join(THINKING_LEVELS)}'
        )
    return ModelSelection(model=inner.model, thinking_level=cast(ThinkingLevel, suffix))


def _close_matches(wanted: str, models: Iterable[ModelSpec]) -> list[str]:
    ranked = sorted(models, key=lambda m: _provider_rank(m.provider))
    names = [f"{m.provider}/{m.id}" for m in ranked]
    by_id: dict[str, str] = {}
    for m in ranked:
        by_id.setdefault(m.id, f"{m.provider}/{m.id}")
    found = difflib.get_close_matches(wanted, names, n=5, cutoff=0.5)
    found += [by_id[i] for i in difflib.get_close_matches(wanted, list(by_id), n=5, cutoff=0.5)]
    return list(dict.fromkeys(found))[:5]


def _not_found(wanted: str, models: list[ModelSpec]) -> ModelSelectionError:
    close = _close_matches(wanted, models)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return ModelSelectionError(f'Model "{wanted}" not found.{hint} Run `tempi --list-models` to see all.')


def _canonical_provider(name: str, registry: ModelRegistry) -> str | None:
    return next((p for p in registry.providers() if p.lower() == name.lower()), None)


def _provider_default(provider: str, registry: ModelRegistry) -> ModelSpec:
    preferred = DEFAULT_MODEL_PER_PROVIDER.get(provider)
    models = registry.models_for(provider)
    supported = [m for m in models if api_supported(m.api)]
    return next((m for m in models if m.id == preferred), (supported or models)[0])


def _runnable(selection: ModelSelection) -> ModelSelection:
    """The selection, if tempi speaks its model's API."""
    model = selection.model
    if not api_supported(model.api):
        speaks = ", ".join(api for api in SUPPORTED_APIS if api != "faux")
        raise ModelSelectionError(
            f'Model "{model.provider}/{model.id}" uses the {model.api} API, which tempi does not '
            f"support yet (it speaks {speaks}). Pick another model; `tempi --list-models` lists them."
        )
    return selection


def _resolve_model_words(registry: ModelRegistry, provider: str | None, model: str) -> ModelSelection:
    if provider is not None:
        canonical = _canonical_provider(provider, registry)
        if canonical is None:
            raise ModelSelectionError(
                f'Unknown provider "{provider}". Known providers: {", ".join(registry.providers())}'
            )
        pattern = model
        if pattern.lower().startswith(f"{canonical.lower()}/"):
            pattern = pattern[len(canonical) + 1 :]
        found = _match_pattern(pattern, registry.models_for(canonical))
        if found is None:
            raise _not_found(f"{canonical}/{pattern}", registry.models)
        return found

    head, slash, rest = model.partition("/")
    inferred = _canonical_provider(head, registry) if slash else None
    if inferred is None:
        found = _match_pattern(model, registry.models)
    else:
        # "openai/gpt-4o" may also be a model id that itself contains a slash
        # (OpenRouter style), so fall back to the whole string.
        found = _match_pattern(rest, registry.models_for(inferred)) or _match_pattern(model, registry.models)
    if found is None:
        raise _not_found(model, registry.models)
    return found


def select_model(
    registry: ModelRegistry,
    provider: str | None = None,
    model: str | None = None,
    *,
    default_provider: str | None = None,
    default_model: str | None = None,
    key_available: Callable[[str], bool] = lambda _provider: False,
) -> ModelSelection:
    """Pick the model for a run.

    `--provider X --model Y`, `--model X/Y`, `--model Y` (exact id, else a fuzzy match on
    id or name) and a `:level` thinking suffix on any of them. With no model named: the
    settings default (`default_provider`/`default_model`), then the first of anthropic and
    openai whose key is available, then any provider with a key.
    """
    if model:
        return _runnable(_resolve_model_words(registry, provider, model))
    if provider:
        canonical = _canonical_provider(provider, registry)
        if canonical is None:
            raise ModelSelectionError(
                f'Unknown provider "{provider}". Known providers: {", ".join(registry.providers())}'
            )
        return _runnable(ModelSelection(model=_provider_default(canonical, registry)))
    warning: str | None = None
    if default_model or (default_provider and _canonical_provider(default_provider, registry)):
        try:
            if default_model:
                return _runnable(_resolve_model_words(registry, default_provider, default_model))
            return select_model(registry, provider=default_provider)
        except ModelSelectionError as exc:
            # A stale settings.json must not stop tempi from starting.
            named = (
                f"{default_provider}/{default_model}"
                if default_provider and default_model
                else (default_model or default_provider)
            )
            warning = f'Ignoring the default model "{named}" from settings: {exc}'
    for candidate in (*DEFAULT_MODEL_PER_PROVIDER, *registry.providers()):
        if candidate == FAUX_PROVIDER or not registry.models_for(candidate):
            continue
        default = _provider_default(candidate, registry)
        if api_supported(default.api) and key_available(candidate):
            return ModelSelection(model=default, warning=warning)
    raise ModelSelectionError(
        "No model chosen and no API key found. Set ANTHROPIC_API_KEY or OPENAI_API_KEY, "
        f"add a provider to models.json, or try the offline demo with --model {FAUX_PROVIDER}/demo."
    )
