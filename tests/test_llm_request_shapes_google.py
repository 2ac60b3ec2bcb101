"""tempi's Gemini and Vertex requests compared with what pi 0.73.1 sent for the same
conversation (recorded by scripts/record_pi_gemini.py against the scripted server).

pi's session is replayed from its session file through tempi's real provider to the same
server; the request must match pi's: path, query, auth header, and a body equal to pi's
except for prose (system prompt, tool and parameter descriptions), compared by type.
Thought signatures are not volatile here: the scripted server makes them from the content,
and they must come back byte for byte.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tempi.activities.llm import StreamOptions, complete
from tempi.agent.llm_context import LlmContext
from tempi.agent.model_registry import builtin_registry
from tempi.agent.model_spec import ThinkingLevel
from tempi.agent.tools import bash, edit, read, write
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.pi_recordings import pi_conversation, pi_request
from tests.test_llm_google import write_external_account

# (recording, provider, model, thinking level pi ran with, the credentials pi had)
CASES: list[tuple[str, str, str, ThinkingLevel, str]] = [
    ("google-generative-ai", "google", "gemini-2.5-flash", "medium", "api-key"),
    ("google-thinking-off", "google", "gemini-2.5-flash", "off", "api-key"),
    ("google-vertex-api-key", "google-vertex", "gemini-3.1-pro-preview", "medium", "api-key"),
    ("google-vertex-adc", "google-vertex", "gemini-2.5-pro", "medium", "adc"),
]
TOOLS = [read.DEFINITION.spec, bash.DEFINITION.spec, edit.DEFINITION.spec, write.DEFINITION.spec]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[ScriptedLLMServer]:
    scenarios = {name: {"turns": [{"text": "done"}], "select": "sequential"} for name, *_ in CASES}
    async with ScriptedLLMServer(scenarios=scenarios) as running:
        yield running


def without_prose(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: without_prose(value) for key, value in schema.items() if key != "description"}
    if isinstance(schema, list):
        return [without_prose(item) for item in schema]
    return schema


@pytest.mark.parametrize(("name", "provider", "model_id", "level", "auth"), CASES)
async def test_request_matches_pis(
    server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    name: str,
    provider: str,
    model_id: str,
    level: ThinkingLevel,
    auth: str,
) -> None:
    expected = pi_request(name)
    builtin = builtin_registry().find(provider, model_id)
    assert builtin is not None
    model = builtin.model_copy(update={"base_url": server.url_for(name, builtin.api)})
    for variable in (
        "GOOGLE_CLOUD_API_KEY",
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
    ):
        monkeypatch.delenv(variable, raising=False)
    if auth == "adc":
        credentials = write_external_account(tmp_path / "adc.json", server.token_url_for(name))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "scripted-project")
        monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
        key = "<authenticated>"
    else:
        key = expected["headers"]["x-goog-api-key"]
    context = LlmContext(system_prompt="You are tempi.", messages=pi_conversation(name), tools=TOOLS)
    answer = await complete(model, context, StreamOptions(api_key=key, thinking_level=level))
    assert (answer.stop_reason, answer.text()) == ("stop", "done"), answer.error_message

    (sent,) = server.requests_for(name)
    assert sent.path == expected["path"].replace("{scenario}", name)
    assert sent.query_string == expected["query"] == "alt=sse"
    assert sent.headers["content-type"] == expected["headers"]["content-type"]
    if auth == "adc":
        (token,) = server.issued_tokens_for(name)
        assert sent.headers["authorization"] == f"Bearer {token}"
        assert expected["headers"]["authorization"].startswith("Bearer ya29.scripted-")
        assert "x-goog-api-key" not in sent.headers
    else:
        assert sent.headers["x-goog-api-key"] == expected["headers"]["x-goog-api-key"]
        assert "authorization" not in sent.headers

    body, theirs = sent.body, expected["body"]
    assert set(body) == set(theirs)
    # The conversation as pi sent it: thoughts, signatures, function calls and responses.
    assert body["contents"] == theirs["contents"]
    assert body["generationConfig"] == theirs["generationConfig"]
    assert body["systemInstruction"] == {"parts": [{"text": "You are tempi."}], "role": "user"}
    assert set(theirs["systemInstruction"]) == {"parts", "role"}
    assert isinstance(theirs["systemInstruction"]["parts"][0]["text"], str)
    (ours_tools,), (pis_tools,) = body["tools"], theirs["tools"]
    assert set(ours_tools) == set(pis_tools) == {"functionDeclarations"}
    for ours, pis in zip(ours_tools["functionDeclarations"], pis_tools["functionDeclarations"], strict=True):
        assert set(ours) == set(pis) == {"name", "description", "parametersJsonSchema"}
        assert ours["name"] == pis["name"]
        assert without_prose(ours["parametersJsonSchema"]) == without_prose(pis["parametersJsonSchema"])


def test_the_recordings_hold_what_the_tests_rely_on() -> None:
    """Each recording replays a signed thought and a signed function call, and answers one
    call with output and one with an error: the parts a wrong conversion would break."""
    for name, *_ in CASES:
        contents = pi_request(name)["body"]["contents"]
        model_parts = contents[1]["parts"]
        assert model_parts[0]["thought"] is True and model_parts[0]["thoughtSignature"].startswith("++++")
        assert "thoughtSignature" in model_parts[2] and "functionCall" in model_parts[2]
        responses = [part["functionResponse"]["response"] for part in contents[2]["parts"]]
        assert [list(response) for response in responses] == [["output"], ["error"]]
