"""OpenAI's error bodies, shared by the chat-completions and responses endpoints."""

from __future__ import annotations

from typing import Any

from tempi.testing.scripted_llm.wire import WireError

CONTEXT_WINDOW = 128_000

# (type, code, message) as OpenAI sends them for each status a scenario may inject.
_FAILURES: dict[int, tuple[str, str | None, str]] = {
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM). Please try again later.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    529: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def openai_error(
    status: int, message: str, type_: str, code: str | None = None, param: str | None = None
) -> WireError:
    body: dict[str, Any] = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return WireError(status=status, body=body)


def openai_failure(status: int) -> WireError:
    default_type = "server_error" if status >= 500 else "invalid_request_error"
    type_, code, message = _FAILURES.get(status, (default_type, None, f"Scripted failure (HTTP {status})."))
    return openai_error(status, message, type_, code)


def openai_bad_request(message: str, status: int = 400) -> WireError:
    return openai_error(status, message, "invalid_request_error")
