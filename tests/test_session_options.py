"""SessionOptions is what callers choose; the workflow gets it as SessionConfig unchanged."""

from __future__ import annotations

from pathlib import Path

from tempi.agent.model_spec import ModelSpec
from tempi.client.options import SessionOptions, new_config
from tempi.workflows.session_types import SessionConfig

MODEL = ModelSpec(id="m", api="openai-completions", provider="p")


def test_every_option_reaches_the_config_with_the_configs_default() -> None:
    options = SessionOptions(cwd="/w", model=MODEL)
    config = new_config(options, lambda sid, created: Path("/s") / f"{sid}.jsonl")
    assert set(SessionOptions.model_fields) <= set(SessionConfig.model_fields)
    defaults = SessionConfig(session_id="x", session_path="/s/x.jsonl", cwd="/w", model=MODEL)
    for name in SessionOptions.model_fields:
        assert getattr(config, name) == getattr(defaults, name), name


def test_a_new_session_gets_an_id_a_file_and_a_level_its_model_accepts() -> None:
    options = SessionOptions(cwd="/w", model=MODEL, thinking_level="high", history_event_budget=10)
    config = new_config(options, lambda sid, created: Path("/s") / f"{sid}.jsonl", session_dir=Path("/d"))
    assert config.session_path.startswith("/d/") and config.session_id in config.session_path
    assert config.created_at and config.history_event_budget == 10
    assert config.thinking_level == "off"  # the model cannot think, as pi clamps at creation
