"""A worker calls only model endpoints its owner configured.

Whoever can start a session on the worker's task queue chooses the session's ModelSpec,
base_url included, and the worker sends its owner's API key there. So before resolving a
key, the worker checks that the session's (provider, api, base_url) is one of its own
models: the built-ins plus the owner's models.json, read on the worker. A session that
names any other endpoint fails at once with a non-retryable error naming that endpoint.
"""

from __future__ import annotations

from pathlib import Path

from temporalio.exceptions import ApplicationError

from tempi.activities.model_options import CredentialResolver
from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_spec import ModelSpec
from tempi.config.models_json import load_model_registry, registry_stamp
from tempi.config.paths import models_json_path
from tempi.workers.credentials import Credentials

MODEL_NOT_CONFIGURED = "ModelNotConfigured"
# A faux model answers inside the worker: no request leaves it, so no key can leak.
_NO_ENDPOINT_APIS = frozenset({"faux"})


def _endpoint(model: ModelSpec) -> tuple[str, str, str]:
    return model.provider, model.api, model.base_url.rstrip("/")


def endpoints(registry: ModelRegistry) -> frozenset[tuple[str, str, str]]:
    return frozenset(_endpoint(known) for known in registry.models)


class OwnerModelsOnly:
    """A CredentialResolver that refuses models whose endpoint the worker's owner did not
    configure, then defers to `inner` for the key and headers."""

    def __init__(self, inner: CredentialResolver, models_json: Path | None = None) -> None:
        self._inner = inner
        self._path = models_json
        self._registry: ModelRegistry | None = None
        # Asked on every model call: the built-ins alone are ~970 models, 0.3 ms a scan.
        self._endpoints: frozenset[tuple[str, str, str]] = frozenset()
        self._stamp: tuple[float | None, float | None] | None = None

    def _current_registry(self) -> Path:
        path = self._path or models_json_path()
        stamp = registry_stamp(path)
        if self._registry is None or stamp != self._stamp:
            self._registry = load_model_registry(path)
            self._endpoints = endpoints(self._registry)
            self._stamp = stamp
        return path

    def __call__(self, model: ModelSpec) -> tuple[str | None, dict[str, str]]:
        # The inner resolver first: its own errors (a broken models.json) say more.
        resolved = self._inner(model)
        path = self._current_registry()
        if model.api not in _NO_ENDPOINT_APIS and _endpoint(model) not in self._endpoints:
            raise ApplicationError(
                f"This worker refuses to call {model.base_url or '(no URL)'} for model "
                f"{model.provider}/{model.id} (api {model.api}): none of its models (built-in or "
                f"in {path}) has that provider, api and URL, so its API keys are not sent there. "
                "Pick a configured model, or add this one to the worker's models.json.",
                type=MODEL_NOT_CONFIGURED,
                non_retryable=True,
            )
        return resolved


def owner_credentials(models_json: Path | None = None) -> OwnerModelsOnly:
    """What a worker uses by default: the owner's keys, for the owner's endpoints only."""
    return OwnerModelsOnly(Credentials(models_json), models_json)
