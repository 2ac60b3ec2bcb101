"""Failure wording and classification for provider calls.

A failed call ends as an assistant message with stopReason "error" and an errorMessage.
That message is all the retry policy sees (it crosses a process boundary as plain data),
so the wording written here is what `classify_error` and `retry_after_ms` read back:
HTTP failures start with the status code, and a server-requested wait is appended as
` (retry after Ns)`.
"""

from __future__ import annotations

import email.utils
import json
import re
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal

from tempi.agent.messages import AssistantMessage

ErrorKind = Literal["retryable", "overflow", "fatal"]


class ProviderError(Exception):
    """A failure the provider reported inside an otherwise healthy stream, or a bad setup."""


class IncompleteStreamError(ProviderError):
    """The stream ended before the provider said the response was finished."""


class StreamAborted(Exception):
    """The caller's abort signal fired."""


ABORTED_MESSAGE = "Request aborted"

_STATUS_PREFIX = re.compile(r"^(\d{3})\b")
_RETRY_AFTER = re.compile(r"\(retry after (\d+(?:\.\d+)?)s\)")

# A rate-limit message may mention tokens ("tokens per min"), so it is checked before overflow.
_RATE_LIMIT = re.compile(
    r"rate[ _-]?limit|too many requests|quota exceeded|throttl|resource[ _]exhausted", re.IGNORECASE
)
_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded"
    r"|maximum context length"
    r"|prompt is too long"
    r"|exceeds? the (?:model'?s? )?context (?:window|length|limit)"
    r"|context window (?:exceeded|is full|limit)"
    r"|too many (?:input )?tokens"
    r"|input is too long"
    r"|input too long"
    r"|prompt too long"
    r"|token limit exceeded"
    r"|reduce the length of the messages"
    r"|input token count.*exceeds the maximum",  # Gemini
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"overloaded|server[_ ]error|internal server error|bad gateway|service unavailable"
    r"|gateway timeout|temporarily unavailable|connection|timed out|timeout|network"
    r"|stream ended|reset by peer|econnreset|socket hang up|unexpected eof|try again"
    # Bedrock's modelStreamErrorException, which AWS says to retry.
    r"|model stream error",
    re.IGNORECASE,
)


def classify_error(message: AssistantMessage) -> ErrorKind | None:
    """How the retry policy should treat a failed call; None when the call did not fail."""
    if message.stop_reason != "error":
        return None
    text = message.error_message or ""
    status_match = _STATUS_PREFIX.match(text)
    status = int(status_match.group(1)) if status_match else None
    if status == 429 or _RATE_LIMIT.search(text):
        return "retryable"
    if _OVERFLOW.search(text):
        return "overflow"
    if status is not None and 400 <= status < 500 and status != 408:
        # The request itself was refused; words like Bedrock's "please reformat your input
        # and try again" do not make it transient.
        return "fatal"
    if (status is not None and status >= 500) or _TRANSIENT.search(text):
        return "retryable"
    return "fatal"


# Failures that say the setup is wrong (key, address, deployment): retrying cannot help.
_SETUP_STATUSES = frozenset({400, 401, 403, 404})


def with_setup_hint(message: str, hint: str) -> str:
    """`message` (in `describe_exception`'s shape) with `hint` (what to set) appended when it
    is an HTTP failure of the setup; a context overflow and everything else stay as they are."""
    status = _STATUS_PREFIX.match(message)
    if status is None or int(status.group(1)) not in _SETUP_STATUSES or _OVERFLOW.search(message):
        return message
    return f"{message} ({hint})"


def is_overflow_text(text: str) -> bool:
    """Whether an error text says the context was too long for the model."""
    return _OVERFLOW.search(text) is not None


def retry_after_ms(message: AssistantMessage) -> int | None:
    """The wait the provider asked for before the next attempt, when it asked for one."""
    match = _RETRY_AFTER.search(message.error_message or "")
    if match is None:
        return None
    return round(float(match.group(1)) * 1000)


def describe_exception(exc: BaseException) -> str:
    """One line saying what went wrong, in the shape `classify_error` reads."""
    if isinstance(exc, _sdk_errors("APIStatusError")):
        return _describe_status_error(exc.status_code, exc.body, exc.response.headers)
    if isinstance(exc, _sdk_errors("APITimeoutError")):
        return "Connection error: the request timed out"
    if isinstance(exc, _sdk_errors("APIConnectionError")):
        cause = _root_cause(exc)
        detail = f": {cause}" if cause else ""
        return f"Connection error{detail}"
    if isinstance(exc, _sdk_errors("APIError")):
        return _describe_status_error(None, exc.body, {}) if exc.body else exc.message
    if _is_transport_error(exc):
        return f"Connection error: {type(exc).__name__}: {exc}".rstrip(": ")
    if isinstance(exc, ProviderError):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"Malformed response from the provider: {exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _sdk_errors(name: str, sdks: tuple[str, ...] = ("anthropic", "openai")) -> tuple[type[Any], ...]:
    """The exception class `name` of those `sdks` this process has loaded: a provider's SDK
    loads with its first call (its import costs seconds), and an SDK that is not loaded
    raised nothing."""
    return tuple(getattr(sys.modules[sdk], name) for sdk in sdks if sdk in sys.modules)


def format_retry_after(seconds: float) -> str:
    shown = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f" (retry after {shown}s)"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait requested by `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def describe_http_failure(status: int, body: object, headers: Mapping[str, str]) -> str:
    """A failed HTTP response (its JSON or text body) in `describe_exception`'s shape, for
    providers that speak HTTP without an SDK."""
    return _describe_status_error(status, body, headers)


def _describe_status_error(status: int | None, body: object, headers: Mapping[str, str]) -> str:
    kind, text = _error_fields(body)
    parts: list[str] = []
    # Anthropic reports mid-stream failures on a 200 response; the status says nothing then.
    if status is not None and status != 200:
        parts.append(str(status))
    if kind:
        parts.append(f"{kind}:")
    parts.append(text or "the provider gave no details")
    wait = retry_after_seconds(headers)
    return " ".join(parts) + (format_retry_after(wait) if wait is not None else "")


def _error_fields(body: object) -> tuple[str | None, str | None]:
    """(code or type, message) from the error bodies Anthropic and OpenAI send."""
    if isinstance(body, str):
        return None, body.strip() or None
    if not isinstance(body, dict):
        return None, None
    inner: Any = body.get("error", body)
    if isinstance(inner, str):
        return None, inner
    if not isinstance(inner, dict):
        return None, json.dumps(body)[:500]
    kind = inner.get("code") or inner.get("type")
    message = inner.get("message")
    return (str(kind) if kind else None), (str(message) if message else json.dumps(inner)[:500])


def _root_cause(exc: BaseException) -> str:
    """The innermost exception behind `exc` that has something to say."""
    found = ""
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        if str(cause):
            found = f"{type(cause).__name__}: {cause}"
        cause = cause.__cause__ or cause.__context__
    return found


def _is_transport_error(exc: BaseException) -> bool:
    # The SDKs speak httpx2; plain httpx and OS errors can surface from custom transports.
    return isinstance(
        exc, (*_sdk_errors("TransportError", ("httpx2", "httpx")), ConnectionError, TimeoutError)
    )
