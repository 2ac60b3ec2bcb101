"""API keys and auth headers, resolved on the worker at call time so they never enter
workflow history."""

from __future__ import annotations

from pathlib import Path

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_spec import ModelSpec
from tempi.config.api_keys import resolve_api_key, resolve_request_headers
from tempi.config.models_json import load_model_registry, registry_stamp
from tempi.config.paths import models_json_path


class Credentials:
    """Reads models.json again whenever it changes, so edits apply without a restart."""

    def __init__(self, models_json: Path | None = None) -> None:
        self._path = models_json
        self._registry: ModelRegistry | None = None
        self._stamp: tuple[float | None, float | None] | None = None

    def _current_registry(self) -> ModelRegistry:
        path = self._path or models_json_path()
        stamp = registry_stamp(path)
        if self._registry is None or stamp != self._stamp:
            self._registry = load_model_registry(path)
            self._stamp = stamp
        return self._registry

    def __call__(self, model: ModelSpec) -> tuple[str | None, dict[str, str]]:
        registry = self._current_registry()
        key = resolve_api_key(model.provider, registry)
        return key, resolve_request_headers(model, registry, key)
