"""Traces and metrics for operators, both off unless the environment turns them on.

Tracing: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) sends spans over
OTLP/HTTP; TEMPI_OTEL_FILE=PATH appends them to a file, one JSON object a line. The
Temporal SDK's TracingInterceptor makes the workflow, update and activity spans; the
activities add their own (tempi/activities/spans.py). Queries (a watcher reads a session's
events with one every few hundred milliseconds) are traced only with TEMPI_TRACE_QUERIES=1.
Spans leave in the background; a collector that is down costs a command at most
FLUSH_BUDGET_S at its end.

Metrics: TEMPI_METRICS_ADDRESS=HOST:PORT serves the SDK's metrics (temporal_*) for
Prometheus from the processes that run workers (`tempi worker`, `tempi server`, the
background server)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from tempi.workers.temporal_connection import TemporalSettingsError

if TYPE_CHECKING:
    from temporalio.client import Interceptor

FILE_VARIABLE = "TEMPI_OTEL_FILE"
QUERIES_VARIABLE = "TEMPI_TRACE_QUERIES"
METRICS_VARIABLE = "TEMPI_METRICS_ADDRESS"
OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

# How long a command waits at its end for its last spans to leave. A collector that answers
# takes milliseconds; one that does not costs the command no more than this.
FLUSH_BUDGET_S = 1.0
# Each export's own bound (OTEL_EXPORTER_OTLP_TIMEOUT overrides): the batch thread retries
# within it, so a hung collector delays only spans, never the process.
EXPORT_TIMEOUT_S = 5.0

_setup_lock = threading.Lock()
_installed = False


def tracing_enabled() -> bool:
    return bool(os.environ.get(FILE_VARIABLE) or any(os.environ.get(v) for v in OTLP_VARIABLES))


def tracing_interceptors() -> list[Interceptor]:
    """The client interceptors that trace this process's Temporal calls (the worker takes
    them from its client), after installing the exporters; none when tracing is off."""
    if not tracing_enabled():
        return []
    from tempi.workers.query_tracing import QuietQueriesTracingInterceptor

    _install_tracer_provider()
    return [QuietQueriesTracingInterceptor(trace_queries=os.environ.get(QUERIES_VARIABLE, "") == "1")]


def _install_tracer_provider() -> None:
    global _installed
    with _setup_lock:
        if _installed:
            return
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "tempi"}))
        provider = TracerProvider(resource=resource)
        if any(os.environ.get(v) for v in OTLP_VARIABLES):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            timeout = None if os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT") else EXPORT_TIMEOUT_S
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=timeout)))
        if path := os.environ.get(FILE_VARIABLE):
            from tempi.workers.span_file import JsonLinesExporter

            try:
                open(path, "a").close()
            except OSError as err:
                raise TemporalSettingsError(
                    f"{FILE_VARIABLE}={path}: cannot write there ({err.strerror}). Name a writable file."
                ) from None
            # Written from the processor's thread: spans of workflow code end inside the
            # workflow sandbox, where files cannot be opened. Flushed often, and by `flush`.
            provider.add_span_processor(
                BatchSpanProcessor(JsonLinesExporter(path), schedule_delay_millis=500)
            )
        trace.set_tracer_provider(provider)
        _installed = True


def flush(budget_s: float = FLUSH_BUDGET_S) -> None:
    """Send the spans still batched, for at most `budget_s`; called before the process exits.

    The SDK's force_flush exports in the calling thread and ignores its own timeout: with the
    collector down, the exporter's retries held every command for 8-11 s. The flush runs in a
    thread of its own instead, left behind (with the spans it could not send) when the budget
    is spent."""
    if not _installed:
        return
    from opentelemetry import trace

    force_flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if force_flush is None:
        return
    sender = threading.Thread(target=force_flush, name="tempi-span-flush", daemon=True)
    sender.start()
    sender.join(budget_s)


def serve_metrics() -> None:
    """With TEMPI_METRICS_ADDRESS set, make this process's Temporal runtime serve Prometheus
    metrics there. Call before the first client connects."""
    address = os.environ.get(METRICS_VARIABLE)
    if not address:
        return
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise TemporalSettingsError(
            f"{METRICS_VARIABLE}={address} is not HOST:PORT; write e.g. 0.0.0.0:9464, or unset it."
        )
    try:
        runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    except Exception as err:  # the core reports a taken port or a bad host as a plain error
        raise TemporalSettingsError(
            f"{METRICS_VARIABLE}={address}: cannot serve metrics there ({err}). Pick a free port."
        ) from None
    Runtime.set_default(runtime, error_if_already_set=False)
