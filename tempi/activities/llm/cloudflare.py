"""Cloudflare's two providers as pi calls them: Workers AI and AI Gateway, whose base URLs
name the account (and gateway) as `{CLOUDFLARE_ACCOUNT_ID}` placeholders filled from the
worker's environment at call time, and whose gateway takes the key in its own header."""

from __future__ import annotations

import os
import re

from tempi.activities.llm.errors import ProviderError
from tempi.agent.model_spec import ModelSpec

WORKERS_AI = "cloudflare-workers-ai"
AI_GATEWAY = "cloudflare-ai-gateway"
_PLACEHOLDER = re.compile(r"\{([A-Z_][A-Z0-9_]*)\}")


def with_cloudflare_base_url(model: ModelSpec) -> ModelSpec:
    """`model` with its base URL's placeholders filled (others are returned as they are)."""
    if model.provider not in (WORKERS_AI, AI_GATEWAY) or "{" not in (model.base_url or ""):
        return model

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if not found:
            raise ProviderError(
                f"{name} is required for provider {model.provider} but is not set: export it where "
                "the worker runs (for the background server: then `tempi server stop`)."
            )
        return found

    return model.model_copy(update={"base_url": _PLACEHOLDER.sub(value, model.base_url)})


def gateway_headers(model: ModelSpec, api_key: str) -> dict[str, str]:
    """The gateway's own authorization header; the provider's key header is left out."""
    return {"cf-aig-authorization": f"Bearer {api_key}"} if model.provider == AI_GATEWAY else {}
