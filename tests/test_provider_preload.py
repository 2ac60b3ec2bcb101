"""A worker loads the SDK of the default model's provider while it waits for its first task,
and only that one: a box with one provider's key never pays for the other's import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = (
    "import asyncio, sys\n"
    "from tempi.workers.provider_preload import preload_default_provider\n"
    "api = asyncio.run(preload_default_provider())\n"
    "print(api, 'openai' in sys.modules, 'anthropic' in sys.modules)\n"
)


def _home_with(tmp_path: Path, api: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    model = {"id": "m1", "name": "m1", "input": ["text"], "contextWindow": 100_000, "maxTokens": 4096}
    provider = {
        "baseUrl": "http://127.0.0.1:9/v1",
        "api": api,
        "apiKey": "PRELOAD_TEST_KEY",
        "models": [model],
    }
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    return home


def _probe(home: Path, *, key: bool) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPI_") and not k.endswith("_API_KEY")}
    env["TEMPI_HOME"] = str(home)
    if key:
        env["PRELOAD_TEST_KEY"] = "sk-not-a-secret"
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("openai-completions", "openai-completions True False"),
        ("anthropic-messages", "anthropic-messages False True"),
    ],
)
def test_the_default_models_sdk_alone_is_loaded(tmp_path: Path, api: str, expected: str) -> None:
    assert _probe(_home_with(tmp_path, api), key=True) == expected


def test_without_a_model_to_call_nothing_is_loaded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()  # no models.json, and no provider key in the environment
    assert _probe(home, key=False) == "None False False"
