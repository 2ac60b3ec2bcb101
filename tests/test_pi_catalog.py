"""tempi's built-in models are pi's catalog (tempi/agent/pi_catalog.json, made by
scripts/pi_catalog.py), and `tempi --list-models` lists what `pi --list-models` lists.

The recording tests/fixtures/pi-0.73.1/list-models.txt is `pi --list-models` of pi 0.73.1,
run with a throwaway home whose auth.json held a dummy key for every provider (pi lists
only the models of providers with a key).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.agent.model_catalog import (
    BUILTIN_MODELS,
    CATALOG_MODELS,
    CATALOG_PROVIDERS,
    CATALOG_VERSION,
    SUPPORTED_APIS,
)
from tempi.agent.model_registry import ModelRegistry, builtin_registry
from tempi.agent.model_selection import ModelSelectionError, select_model
from tempi.agent.model_spec import ModelSpec
from tests.conftest import run_tempi, tempi_env

FIXTURES = Path(__file__).parent / "fixtures"


def _rows(listing: str) -> set[tuple[str, str, str, str]]:
    """(provider, id, context, max out) of each row of a --list-models table."""
    rows = set()
    for line in listing.splitlines()[1:]:
        provider, model_id, context, max_out = line.split()[:4]
        rows.add((provider, model_id, context, max_out))
    return rows


def _pi_listing() -> str:
    return (FIXTURES / f"pi-{CATALOG_VERSION}" / "list-models.txt").read_text()


def test_catalog_is_pis_whole_catalog() -> None:
    assert CATALOG_VERSION == "0.73.1"
    assert (len(CATALOG_PROVIDERS), len(CATALOG_MODELS)) == (31, 969)
    pi_rows = _pi_listing().splitlines()[1:]
    assert len(pi_rows) == len(CATALOG_MODELS)
    assert {row.split()[0] for row in pi_rows} == set(CATALOG_PROVIDERS)
    # Per-model headers and compat come along.
    copilot = builtin_registry().find("github-copilot", "claude-haiku-4.5")
    assert copilot is not None and copilot.headers and "User-Agent" in copilot.headers
    assert copilot.compat == {"supportsEagerToolInputStreaming": False}


def test_list_models_matches_pi(tmp_path: Path) -> None:
    listed = run_tempi(["--list-models"], cwd=tmp_path, env=tempi_env(tmp_path / "home", None))
    assert listed.returncode == 0, listed.stderr
    tempi_rows = {row for row in _rows(listed.stdout) if row[0] != "faux"}
    pi_rows = _rows(_pi_listing())
    assert sorted(pi_rows - tempi_rows) == [] and sorted(tempi_rows - pi_rows) == []


def test_pi_data_wins_over_the_old_table() -> None:
    # tempi's hand-written table said 0.125; pi's catalog says 0.13.
    gpt51 = builtin_registry().find("openai", "gpt-5.1")
    assert gpt51 is not None and gpt51.cost.cache_read == 0.13


# Every API of pi 0.73.1's catalog is spoken now; a later pi's new API (or a models.json
# provider naming one) must still be refused by name, not fail at the first call.
FUTURE_API = "cloudflare-workers-ai"


def _with_a_future_api() -> ModelRegistry:
    registry = builtin_registry()
    future = ModelSpec(id="future-1", name="Future 1", api=FUTURE_API, provider="future", base_url="http://x")
    return ModelRegistry(models=[*registry.models, future], request_configs=registry.request_configs)


def test_every_api_of_pis_catalog_is_spoken() -> None:
    assert {m.api for m in CATALOG_MODELS} <= set(SUPPORTED_APIS)


@pytest.mark.parametrize("words", [{"model": "future/future-1"}, {"provider": "future"}])
def test_choosing_a_model_of_an_unsupported_api_names_the_api(words: dict[str, str]) -> None:
    with pytest.raises(
        ModelSelectionError, match=f"uses the {FUTURE_API} API, which tempi does not support yet"
    ):
        select_model(_with_a_future_api(), **words)


@pytest.mark.parametrize(
    ("provider", "api"),
    [
        ("mistral", "mistral-conversations"),
        ("azure-openai-responses", "azure-openai-responses"),
        ("openai-codex", "openai-codex-responses"),
        ("amazon-bedrock", "bedrock-converse-stream"),
    ],
)
def test_models_of_the_newer_apis_can_be_chosen(provider: str, api: str) -> None:
    selection = select_model(builtin_registry(), provider=provider)
    assert (selection.model.provider, selection.model.api) == (provider, api)


def test_unsupported_settings_default_falls_back_with_a_warning() -> None:
    selection = select_model(
        _with_a_future_api(),
        default_provider="future",
        default_model="future-1",
        key_available=lambda p: p in ("future", "openai"),
    )
    assert (selection.model.provider, selection.model.id) == ("openai", "gpt-5.4")
    assert selection.warning is not None and FUTURE_API in selection.warning


def test_a_key_for_an_unsupported_provider_is_not_a_default() -> None:
    with pytest.raises(ModelSelectionError, match="no API key found"):
        select_model(_with_a_future_api(), key_available=lambda p: p == "future")


def test_gemini_and_vertex_models_are_runnable() -> None:
    for words in ({"model": "google/gemini-2.5-pro"}, {"model": "google-vertex/gemini-3.1-pro-preview"}):
        selection = select_model(builtin_registry(), **words)
        assert selection.model.api in ("google-generative-ai", "google-vertex")


def test_ids_many_providers_serve_resolve_to_the_first_party_one() -> None:
    registry = builtin_registry()
    served = [m.provider for m in BUILTIN_MODELS if m.id == "gpt-4o"]
    assert len(served) > 1
    assert select_model(registry, model="gpt-4o").model.provider == "openai"
    assert select_model(registry, model="claude-opus-4-5").model.provider == "anthropic"
    assert select_model(registry, model="opus").model.provider == "anthropic"
