"""Two OpenAI Responses dialects: Azure OpenAI (`POST .../openai/v1/responses?api-version=...`,
key in `api-key`) and the ChatGPT Codex backend (`POST .../codex/responses`, an access token
and the `chatgpt-account-id` header). Both stream OpenAI's Responses events; only who may
call differs, so each refuses a request its real service would refuse for its credentials."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

from tempi.testing.scripted_llm.openai_errors import openai_error
from tempi.testing.scripted_llm.openai_responses import OpenAIResponsesWire
from tempi.testing.scripted_llm.wire import ApiName, WireError


class AzureResponsesWire(OpenAIResponsesWire):
    name: ApiName = "azure-openai-responses"

    def authorize(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> WireError | None:
        if not headers.get("api-key"):
            # Azure's own wording for a request without a valid key.
            message = (
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
                "provide a valid key for an active subscription and use a correct regional API "
                "endpoint for your resource."
            )
            return openai_error(401, message, "invalid_request_error", "401")
        if not parse_qs(urlsplit(url).query).get("api-version"):
            return openai_error(400, "Missing required query parameter: api-version", "invalid_request_error")
        return None


class CodexResponsesWire(OpenAIResponsesWire):
    name: ApiName = "openai-codex-responses"

    def authorize(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> WireError | None:
        if not headers.get("authorization", "").startswith("Bearer ") or not headers.get(
            "chatgpt-account-id"
        ):
            return openai_error(401, "Unauthorized: missing access token or account", "invalid_request_error")
        return None
