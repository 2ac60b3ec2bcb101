"""tempi's own metrics, exported wherever the worker's Temporal runtime exports the SDK's
(Prometheus at TEMPI_METRICS_ADDRESS): tokens, cost, latency and errors per model call,
tool calls and their errors per tool, and lost sandboxes. Each carries the SDK's own labels
(namespace, task queue, activity type) beside tempi's."""

from __future__ import annotations

from temporalio import activity
from temporalio.common import MetricMeter

from tempi.agent.messages import AssistantMessage


def _meter() -> MetricMeter | None:
    try:
        return activity.metric_meter()
    except RuntimeError:  # outside an activity (a plain function called by a test or a CLI)
        return None


def record_model_call(provider: str, model: str, message: AssistantMessage, seconds: float) -> None:
    meter = _meter()
    if meter is None:
        return
    meter = meter.with_additional_attributes({"provider": provider, "model": model})
    usage = message.usage
    tokens = meter.create_counter("tempi_llm_tokens", "Tokens of model calls", "tokens")
    for kind, count in (
        ("input", usage.input),
        ("output", usage.output),
        ("cache_read", usage.cache_read),
        ("cache_write", usage.cache_write),
    ):
        if count:
            tokens.add(count, {"kind": kind})
    # Counters take whole numbers: the cost goes in millionths of a dollar.
    cost = round(usage.cost.total * 1_000_000)
    if cost:
        meter.create_counter("tempi_llm_cost_microdollars", "Cost of model calls", "µUSD").add(cost)
    meter.create_histogram("tempi_llm_call_duration", "Duration of a model call", "ms").record(
        round(seconds * 1000)
    )
    meter.create_counter("tempi_llm_calls", "Model calls by how they stopped").add(
        1, {"stop_reason": message.stop_reason}
    )


def record_tool_call(tool: str, is_error: bool) -> None:
    meter = _meter()
    if meter is None:
        return
    meter.create_counter("tempi_tool_calls", "Tool calls, and whether the model read an error").add(
        1, {"tool": tool, "is_error": "true" if is_error else "false"}
    )


def record_sandbox_failure(kind: str) -> None:
    meter = _meter()
    if meter is None:
        return
    meter.create_counter("tempi_sandbox_failures", "Tool calls whose sandbox was unavailable").add(
        1, {"sandbox": kind}
    )
