"""Built-in models, models.json merging and the --provider / --model rules."""

from __future__ import annotations

import pytest

from tempi.agent.model_catalog import BUILTIN_MODELS
from tempi.agent.model_registry import ModelRegistry, build_registry, builtin_registry
from tempi.agent.model_selection import ModelSelectionError, select_model
from tempi.agent.models_config import ModelsConfig, ModelsConfigError


def registry_with(providers: dict) -> ModelRegistry:
    return build_registry(ModelsConfig.model_validate({"providers": providers}))


# --- built-ins -------------------------------------------------------------------------


def test_builtin_models_are_unique_and_complete() -> None:
    keys = [(m.provider, m.id) for m in BUILTIN_MODELS]
    assert len(keys) == len(set(keys))
    for model in BUILTIN_MODELS:
        assert model.name and model.context_window > 0 and model.max_tokens > 0


def test_builtin_anthropic_and_openai_numbers() -> None:
    registry = builtin_registry()
    sonnet = registry.find("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None
    assert sonnet.api == "anthropic-messages"
    assert sonnet.base_url == "https://api.anthropic.com"
    assert (sonnet.context_window, sonnet.max_tokens) == (200_000, 64_000)
    assert (sonnet.cost.input, sonnet.cost.output, sonnet.cost.cache_read, sonnet.cost.cache_write) == (
        3,
        15,
        0.3,
        3.75,
    )
    assert sonnet.reasoning and sonnet.supports_images

    gpt5 = registry.find("openai", "gpt-5")
    assert gpt5 is not None
    assert gpt5.base_url == "https://api.openai.com/v1"
    assert (gpt5.context_window, gpt5.cost.input, gpt5.cost.output) == (400_000, 1.25, 10)
    assert gpt5.thinking_level_map == {"off": None}

    gpt4o = registry.find("openai", "gpt-4o")
    assert gpt4o is not None and not gpt4o.reasoning

    faux = registry.find("faux", "faux-model")
    assert faux is not None and faux.api == "faux"


# --- models.json merging ---------------------------------------------------------------


def test_custom_provider_models_get_pi_defaults() -> None:
    registry = registry_with(
        {
            "ollama": {
                "baseUrl": "http://localhost:11434/v1",
                "api": "openai-completions",
                "apiKey": "ollama",
                "models": [{"id": "llama3.1:8b"}, {"id": "qwen", "name": "Qwen", "contextWindow": 32000}],
            }
        }
    )
    llama = registry.find("ollama", "llama3.1:8b")
    assert llama is not None
    assert llama.name == "llama3.1:8b"
    assert llama.api == "openai-completions"
    assert llama.base_url == "http://localhost:11434/v1"
    assert (llama.context_window, llama.max_tokens, llama.input, llama.reasoning) == (
        128_000,
        16_384,
        ["text"],
        False,
    )
    qwen = registry.find("ollama", "qwen")
    assert qwen is not None and qwen.context_window == 32_000 and qwen.name == "Qwen"
    # Built-ins are still there.
    assert registry.find("anthropic", "claude-opus-4-5") is not None


def test_base_url_override_keeps_builtin_models() -> None:
    registry = registry_with({"anthropic": {"baseUrl": "https://proxy.example.com"}})
    anthropic_models = registry.models_for("anthropic")
    assert len(anthropic_models) == len([m for m in BUILTIN_MODELS if m.provider == "anthropic"])
    assert {m.base_url for m in anthropic_models} == {"https://proxy.example.com"}
    assert {m.base_url for m in registry.models_for("openai")} == {"https://api.openai.com/v1"}


def test_custom_model_replaces_builtin_with_same_id_and_adds_new_ones() -> None:
    registry = registry_with(
        {
            "anthropic": {
                "models": [
                    {"id": "claude-sonnet-4-5", "name": "My Sonnet", "maxTokens": 1000},
                    {"id": "claude-next", "reasoning": True},
                ]
            }
        }
    )
    replaced = registry.find("anthropic", "claude-sonnet-4-5")
    assert replaced is not None and replaced.name == "My Sonnet" and replaced.max_tokens == 1000
    # Inherits the built-in provider's api and endpoint.
    added = registry.find("anthropic", "claude-next")
    assert added is not None
    assert (added.api, added.base_url, added.reasoning) == (
        "anthropic-messages",
        "https://api.anthropic.com",
        True,
    )
    assert [m.id for m in registry.models_for("anthropic")].count("claude-sonnet-4-5") == 1


def test_model_overrides_change_only_given_fields() -> None:
    registry = registry_with(
        {
            "openai": {
                "modelOverrides": {
                    "gpt-4o": {"name": "Four-O", "cost": {"input": 1}, "compat": {"supportsStore": False}},
                    "no-such-model": {"name": "ignored"},
                }
            }
        }
    )
    gpt4o = registry.find("openai", "gpt-4o")
    assert gpt4o is not None
    assert gpt4o.name == "Four-O"
    assert (gpt4o.cost.input, gpt4o.cost.output) == (1, 10)
    assert gpt4o.compat == {"supportsStore": False}
    assert registry.find("openai", "no-such-model") is None


def test_api_key_and_headers_are_kept_unresolved_for_the_worker() -> None:
    registry = registry_with(
        {
            "proxy": {
                "baseUrl": "https://p.example.com/v1",
                "api": "openai-completions",
                "apiKey": "!echo secret",
                "headers": {"x-team": "TEAM_VAR"},
                "authHeader": True,
                "models": [{"id": "m1", "headers": {"x-model": "literal"}}],
            }
        }
    )
    config = registry.request_config("proxy")
    assert config is not None
    assert (config.api_key, config.headers, config.auth_header) == (
        "!echo secret",
        {"x-team": "TEAM_VAR"},
        True,
    )
    model = registry.find("proxy", "m1")
    assert model is not None and model.headers is None
    assert registry.header_config_for(model) == {"x-model": "literal"}


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ({"x": {"api": "openai-completions", "apiKey": "k", "models": [{"id": "m"}]}}, '"baseUrl"'),
        ({"x": {"baseUrl": "http://h", "api": "openai-completions", "models": [{"id": "m"}]}}, '"apiKey"'),
        ({"x": {"baseUrl": "http://h", "apiKey": "k", "models": [{"id": "m"}]}}, 'no "api"'),
        ({"x": {}}, "sets nothing"),
        (
            {
                "x": {
                    "baseUrl": "http://h",
                    "apiKey": "k",
                    "api": "a",
                    "models": [{"id": "m", "contextWindow": 0}],
                }
            },
            "contextWindow",
        ),
    ],
)
def test_impossible_provider_configs_are_rejected(providers: dict, message: str) -> None:
    with pytest.raises(ModelsConfigError, match=message):
        registry_with(providers)


def test_known_provider_needs_no_endpoint_or_key() -> None:
    registry = registry_with({"openrouter": {"models": [{"id": "anthropic/claude-3.5-sonnet"}]}})
    model = registry.find("openrouter", "anthropic/claude-3.5-sonnet")
    assert model is not None
    assert (model.api, model.base_url) == ("openai-completions", "https://openrouter.ai/api/v1")


# --- selecting a model -----------------------------------------------------------------


def test_provider_and_model_flags() -> None:
    selection = select_model(builtin_registry(), "openai", "gpt-4o")
    assert (selection.model.provider, selection.model.id, selection.thinking_level) == (
        "openai",
        "gpt-4o",
        None,
    )


def test_provider_slash_model() -> None:
    selection = select_model(builtin_registry(), model="anthropic/claude-haiku-4-5")
    assert (selection.model.provider, selection.model.id) == ("anthropic", "claude-haiku-4-5")


def test_provider_flag_tolerates_repeated_prefix() -> None:
    selection = select_model(builtin_registry(), "anthropic", "anthropic/claude-opus-4-1")
    assert selection.model.id == "claude-opus-4-1"


def test_bare_id_and_case_insensitivity() -> None:
    assert select_model(builtin_registry(), model="GPT-5-MINI").model.id == "gpt-5-mini"


def test_fuzzy_match_prefers_exact_then_newest_alias() -> None:
    registry = builtin_registry()
    # Exact id wins over the longer ids that contain it.
    assert select_model(registry, model="gpt-5").model.id == "gpt-5"
    # Several contain "sonnet": the newest undated alias is chosen.
    assert select_model(registry, model="sonnet").model.id == "claude-sonnet-4-6"
    # Names match too.
    assert select_model(registry, model="Haiku 3.5").model.id == "claude-3-5-haiku-latest"


def test_thinking_suffix() -> None:
    selection = select_model(builtin_registry(), model="anthropic/claude-sonnet-4-5:high")
    assert (selection.model.id, selection.thinking_level) == ("claude-sonnet-4-5", "high")
    selection = select_model(builtin_registry(), "openai", "o3:minimal")
    assert (selection.model.id, selection.thinking_level) == ("o3", "minimal")


def test_colons_inside_model_ids_are_not_thinking_levels() -> None:
    registry = registry_with(
        {
            "ollama": {
                "baseUrl": "http://h",
                "api": "openai-completions",
                "apiKey": "x",
                "models": [{"id": "qwen:7b"}],
            }
        }
    )
    assert select_model(registry, model="qwen:7b").thinking_level is None
    selection = select_model(registry, model="ollama/qwen:7b:low")
    assert (selection.model.id, selection.thinking_level) == ("qwen:7b", "low")


def test_invalid_thinking_level_lists_valid_ones() -> None:
    with pytest.raises(ModelSelectionError, match="off, minimal, low, medium, high, xhigh"):
        select_model(builtin_registry(), model="claude-sonnet-4-5:extreme")


def test_unknown_model_suggests_close_matches() -> None:
    with pytest.raises(
        ModelSelectionError, match=r'"claude-sonet-4-5" not found.*anthropic/claude-sonnet-4-5'
    ):
        select_model(builtin_registry(), model="claude-sonet-4-5")


def test_unknown_provider_lists_known_ones() -> None:
    with pytest.raises(ModelSelectionError, match=r'Unknown provider "nope".*anthropic'):
        select_model(builtin_registry(), "nope", "gpt-5")


def test_same_id_under_two_providers_asks_for_the_provider() -> None:
    registry = registry_with(
        {
            "proxy": {
                "baseUrl": "http://h",
                "api": "openai-completions",
                "apiKey": "k",
                "models": [{"id": "gpt-4o"}],
            }
        }
    )
    with pytest.raises(ModelSelectionError, match="openai/gpt-4o, proxy/gpt-4o"):
        select_model(registry, model="gpt-4o")
    assert select_model(registry, model="proxy/gpt-4o").model.provider == "proxy"


def test_default_model_follows_available_keys() -> None:
    """pi's defaultModelPerProvider: its default model for each provider, tried in its order."""
    registry = builtin_registry()
    both = select_model(registry, key_available=lambda p: p in ("anthropic", "openai"))
    assert (both.model.provider, both.model.id) == ("anthropic", "claude-opus-4-7")
    only_openai = select_model(registry, key_available=lambda p: p == "openai")
    assert (only_openai.model.provider, only_openai.model.id) == ("openai", "gpt-5.4")
    # deepseek comes before openrouter in pi's order, both after anthropic and openai.
    later = select_model(registry, key_available=lambda p: p in ("openrouter", "deepseek"))
    assert (later.model.provider, later.model.id) == ("deepseek", "deepseek-v4-pro")
    only_openrouter = select_model(registry, key_available=lambda p: p == "openrouter")
    assert only_openrouter.model.id == "moonshotai/kimi-k2.6"
    assert select_model(registry, key_available=lambda p: p == "xai").model.id == "grok-4.20-0309-reasoning"


def test_settings_default_beats_key_order() -> None:
    selection = select_model(
        builtin_registry(), default_provider="openai", default_model="gpt-4.1", key_available=lambda p: True
    )
    assert selection.model.id == "gpt-4.1"


def test_stale_settings_default_falls_back_with_a_warning() -> None:
    selection = select_model(
        builtin_registry(),
        default_provider="google",
        default_model="gemini-9",
        key_available=lambda p: p == "openai",
    )
    assert selection.model.id == "gpt-5.4"
    assert selection.warning is not None and "gemini-9" in selection.warning


def test_provider_alone_picks_its_default_model() -> None:
    assert select_model(builtin_registry(), provider="openai").model.id == "gpt-5.4"
    assert select_model(builtin_registry(), provider="groq").model.id == "openai/gpt-oss-120b"


def test_no_key_and_no_model_explains_what_to_do() -> None:
    with pytest.raises(ModelSelectionError) as raised:
        select_model(builtin_registry())
    message = str(raised.value)
    assert "ANTHROPIC_API_KEY" in message and "OPENAI_API_KEY" in message
    assert "models.json" in message and "faux/demo" in message
