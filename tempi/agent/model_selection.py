"""How a user's `--provider` / `--model` words (or the settings' default) pick a model.

Pure: whether a provider has a key is passed in as a predicate.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import cast

from tempi.agent.base import PiModel
from tempi.agent.default_models import DEFAULT_MODEL_PER_PROVIDER
from tempi.agent.model_catalog import CATALOG_PROVIDERS, FAUX_PROVIDER, SUPPORTED_APIS, api_supported
from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel

# Whose model a name matching several providers' models picks first (tempi's choice: pi's
# own matching would pick amazon-bedrock's, the first provider of its catalog).
_PREFERRED_IN_MATCHES = ("anthropic", "openai")
# _provider_rank's order, looked up for every model a name matches.
_PROVIDER_RANKS: dict[str, tuple[int, int]] = {
    **{p: (2, i) for i, p in enumerate(CATALOG_PROVIDERS)},
    **{p: (0, i) for i, p in enumerate(_PREFERRED_IN_MATCHES)},
}


def _provider_rank(provider: str) -> tuple[int, int]:
    """Which provider's model wins when one name matches models of several: anthropic
    and openai first, then providers only models.json defines, then pi's catalog order."""
    return _PROVIDER_RANKS.get(provider, (1, 0))


class ModelSelectionError(ValueError):
    """The user's --provider / --model words do not pick exactly one model."""


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
