"""LLM provider layer: one streaming contract over Anthropic Messages, OpenAI Chat
Completions, OpenAI Responses and an in-process faux provider for tests."""

from tempi.activities.llm.contract import StreamOptions
from tempi.activities.llm.errors import ErrorKind, classify_error, retry_after_ms
from tempi.activities.llm.faux import clear_faux, register_faux
from tempi.activities.llm.faux_responses import FauxResponse, FauxToolCall, FauxUsage
from tempi.activities.llm.stream import complete, stream_assistant

__all__ = [
    "ErrorKind",
    "FauxResponse",
    "FauxToolCall",
    "FauxUsage",
    "StreamOptions",
    "classify_error",
    "clear_faux",
    "complete",
    "register_faux",
    "retry_after_ms",
    "stream_assistant",
]
