"""Vertex AI (`google-vertex`): Gemini's wire format (see `google_shared`) with Vertex's
endpoints and credentials, read on the worker at call time as pi reads them.

- API key (express mode): the resolved key or GOOGLE_CLOUD_API_KEY, sent as
  `x-goog-api-key` to `https://aiplatform.googleapis.com/v1/publishers/google/models/…`.
  pi's markers for "credentials come from elsewhere" (`<authenticated>`,
  `gcp-vertex-credentials`) are no key.
- ADC otherwise: GOOGLE_CLOUD_PROJECT (or GCLOUD_PROJECT) and GOOGLE_CLOUD_LOCATION, a
  Bearer token from the credentials file (`vertex_adc`), to
  `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/…`.
- A custom base URL (a proxy, a test server) replaces the host and takes the publisher
  path without project or location: `{baseUrl}[/v1]/publishers/google/models/…`, `/v1`
  added unless the URL has a version segment. The catalog's `https://{location}-…` is no
  custom URL.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncGenerator, Mapping
from urllib.parse import urlsplit

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.contract import StreamOptions, request_headers
from tempi.activities.llm.errors import ProviderError
from tempi.activities.llm.google_shared import build_request, stream_generate_content
from tempi.activities.llm.google_thinking import GoogleApi
from tempi.activities.llm.vertex_adc import ADC_SETUP, adc_access_token, adc_file
from tempi.agent.llm_context import LlmContext
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

API: GoogleApi = "google-vertex"
API_VERSION = "v1"
GLOBAL_HOST = "aiplatform.googleapis.com"
_CREDENTIALS_MARKER = "gcp-vertex-credentials"
_PLACEHOLDER = re.compile(r"^<[^>]+>$")
_VERSION_SEGMENT = re.compile(r"^v\d+(?:beta\d*)?$")
_MULTI_REGIONS = ("us", "eu")
NO_PROJECT = (
    "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT or pass project in options."
)
NO_LOCATION = "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."


def vertex_api_key(resolved: str | None, env: Mapping[str, str] | None = None) -> str | None:
    environment = os.environ if env is None else env
    for candidate in (resolved, environment.get("GOOGLE_CLOUD_API_KEY")):
        key = (candidate or "").strip()
        if key and key != _CREDENTIALS_MARKER and not _PLACEHOLDER.match(key):
            return key
    return None


def custom_base_url(model: ModelSpec) -> str | None:
    base = model.base_url.strip()
    return None if not base or "{location}" in base else base


def model_path(model_id: str) -> str:
    if model_id.startswith(("publishers/", "projects/", "models/")):
        return model_id
    if "/" in model_id:
        publisher, name = model_id.split("/", 1)
        return f"publishers/{publisher}/models/{name}"
    return f"publishers/google/models/{model_id}"


def request_url(model: ModelSpec, project: str | None = None, location: str | None = None) -> str:
    """The streaming URL; `project` and `location` are given in ADC mode only."""
    path = f"{model_path(model.id)}:streamGenerateContent?alt=sse"
    base = custom_base_url(model)
    if base is not None:
        base = base.rstrip("/")
        has_version = any(_VERSION_SEGMENT.match(part) for part in urlsplit(base).path.split("/"))
        return f"{base}/{path}" if has_version else f"{base}/{API_VERSION}/{path}"
    if project is None or location is None:
        return f"https://{GLOBAL_HOST}/{API_VERSION}/{path}"
    if location == "global":
        host = GLOBAL_HOST
    elif location in _MULTI_REGIONS:
        host = f"aiplatform.{location}.rep.googleapis.com"
    else:
        host = f"{location}-{GLOBAL_HOST}"
    if not path.startswith("projects/"):
        path = f"projects/{project}/locations/{location}/{path}"
    return f"https://{host}/{API_VERSION}/{path}"


async def stream_google_vertex(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    headers = request_headers(model, options)
    api_key = vertex_api_key(options.api_key)
    if api_key is not None:
        url = request_url(model)
        headers["x-goog-api-key"] = api_key
        hint = f'provider "{model.provider}": check GOOGLE_CLOUD_API_KEY or the provider\'s apiKey in models.json'
    else:
        project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT")
        if not project:
            raise ProviderError(NO_PROJECT)
        location = os.environ.get("GOOGLE_CLOUD_LOCATION")
        if not location:
            raise ProviderError(NO_LOCATION)
        credentials = adc_file()
        if credentials is None:
            raise ProviderError(
                f'No credentials for provider "{model.provider}" (model "{model.id}"): '
                f"set GOOGLE_CLOUD_API_KEY, or {ADC_SETUP}."
            )
        url = request_url(model, project, location)
        headers["authorization"] = f"Bearer {await abort.run(adc_access_token(credentials))}"
        hint = f'provider "{model.provider}": check the ADC credentials in {credentials} and their access to project {project}'
    body = build_request(model, context, options, API)
    async for event in stream_generate_content(url, headers, body, options, assembler, abort, hint):
        yield event
