"""Traces and metrics for operators, both off unless the environment turns them on.

Tracing: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) sends spans over
OTLP/HTTP; TEMPI_OTEL_FILE=PATH appends them to a file, one JSON object a line. The
Temporal SDK's TracingInterceptor makes the workflow, update and activity spans; the
activities add their own (tempi/activities/spans.py).

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
METRICS_VARIABLE = "TEMPI_METRICS_ADDRESS"
OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_setup_lock = threading.Lock()
_installed = False


def tracing_enabled() -> bool:
    return bool(os.environ.get(FILE_VARIABLE) or any(os.environ.get(v) for v in OTLP_VARIABLES))


def tracing_interceptors() -> list[Interceptor]:
    """The client interceptors that trace this process's Temporal calls (the worker takes
    them from its client), after installing the exporters; none when tracing is off."""
    if not tracing_enabled():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    _install_tracer_provider()
    return [TracingInterceptor()]


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

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
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


def flush() -> None:
    """Send the spans still batched; called before the process exits."""
    if _installed:
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            force_flush(5_000)


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
