"""The models tempi knows before any models.json: pi's published catalog plus the
scripted faux models, and which of their wire APIs tempi can call."""

from __future__ import annotations

import json
from pathlib import Path

from tempi.agent.model_spec import ModelCost, ModelSpec

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
