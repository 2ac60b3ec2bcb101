"""A scripted LLM server for tests and manual runs.

It speaks OpenAI chat completions, OpenAI responses, Anthropic messages, Azure's and Codex's
responses, Mistral's chat, Gemini's generateContent (Gemini API and Vertex AI, with an OAuth
token endpoint) with real SSE, and Amazon Bedrock's ConverseStream with AWS event-stream
frames (checking SigV4 signatures),
so the official SDKs (and pi) can talk to it, and answers from scripted scenarios.
"""

from tempi.testing.scripted_llm.recording import RecordedRequest
from tempi.testing.scripted_llm.scenario import (
    DEFAULT_SUMMARY,
    Scenario,
    ScenarioError,
    ScriptedToolCall,
    ScriptedTurn,
    ScriptedUsage,
    load_scenarios,
)
from tempi.testing.scripted_llm.server import ScriptedLLMServer

__all__ = [
    "DEFAULT_SUMMARY",
    "RecordedRequest",
    "Scenario",
    "ScenarioError",
    "ScriptedLLMServer",
    "ScriptedToolCall",
    "ScriptedTurn",
    "ScriptedUsage",
    "load_scenarios",
]
