"""The OpenAI client Cloudflare AI Gateway is called with (kept apart from cloudflare.py so
the Anthropic provider does not import the OpenAI SDK)."""

from __future__ import annotations

from typing import Any

import openai


class GatewayOpenAI(openai.AsyncOpenAI):
    """The OpenAI client without `Authorization`: AI Gateway reads cf-aig-authorization."""

    @property
    def auth_headers(self) -> dict[str, str]:
        return {}

    def _auth_headers(self, security: Any) -> dict[str, str]:
        return {}

    def _validate_headers(self, headers: Any, custom_headers: Any) -> None:
        return None
