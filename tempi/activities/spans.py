"""The activities' own spans: one per model call (`chat MODEL`, with token counts) and per
tool (`execute_tool NAME`), named and attributed as OpenTelemetry's GenAI conventions say.
They nest in the SDK's RunActivity span; with tracing off (tempi/workers/telemetry.py) they
cost a no-op span."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Iterator

from opentelemetry import trace

from tempi.activities.metrics import record_tool_call
from tempi.workflows.activity_payloads import ToolCallResult

_tracer = trace.get_tracer("tempi")


@contextlib.contextmanager
def llm_span(provider: str, model: str) -> Iterator[trace.Span]:
    """One model call; the caller adds the token counts with `record_usage`."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    with _tracer.start_as_current_span(
        f"chat {model}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def record_usage(span: trace.Span, *, input_tokens: int, output_tokens: int, stop_reason: str) -> None:
    span.set_attributes(
        {
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "gen_ai.response.finish_reasons": [stop_reason],
        }
    )


@contextlib.contextmanager
def tool_span(name: str) -> Iterator[trace.Span]:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    with _tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes) as span:
        yield span


async def traced_tool_call(name: str, call: Awaitable[ToolCallResult]) -> ToolCallResult:
    """A tool activity's work under its `execute_tool` span, marked with whether it failed."""
    with tool_span(name) as span:
        result = await call
        span.set_attribute("tempi.tool.is_error", result.message.is_error)
        record_tool_call(name, result.message.is_error)
        return result
