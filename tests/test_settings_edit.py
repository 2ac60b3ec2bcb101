"""/settings and /scoped-models write the global settings.json as pi does: the changed keys
only, everything else kept; and `enabledModels` chooses the models Ctrl+P cycles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_spec import ModelSpec
from tempi.agent.scoped_models import scoped_models
from tempi.config.errors import ConfigError
from tempi.config.settings_edit import save_settings


def test_a_change_keeps_every_other_key_and_none_removes_one(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps({"theme": "dark", "compaction": {"reserveTokens": 9000}, "enabledModels": ["x"]})
    )
    save_settings({"compaction": {"enabled": False}, "steeringMode": "all", "enabledModels": None}, path)
    assert json.loads(path.read_text()) == {
        "theme": "dark",
        "compaction": {"reserveTokens": 9000, "enabled": False},
        "steeringMode": "all",
    }


def test_a_broken_file_is_left_for_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        save_settings({"steeringMode": "all"}, path)
    assert path.read_text() == "{not json"


def _model(provider: str, model_id: str) -> ModelSpec:
    return ModelSpec(
        id=model_id, name=model_id, api="openai-completions", provider=provider, base_url="http://x"
    )


def test_enabled_models_pick_the_cycle_by_name_glob_or_id() -> None:
    models = [_model("a", "one"), _model("a", "two"), _model("b", "three")]
    registry = ModelRegistry(models)

    def chosen(patterns: list[str]) -> list[tuple[str, str | None]]:
        return [(s.model.id, s.thinking_level) for s in scoped_models(registry, patterns, strict=False)]

    assert chosen([]) == []
    assert chosen(["a/*"]) == [("one", None), ("two", None)]
    assert chosen(["three", "a/one:high"]) == [("three", None), ("one", "high")]
    assert chosen(["nothing/matches"]) == []
