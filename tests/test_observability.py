"""Traces and metrics, off by default and on by environment: one `tempi -p` session traced
to a file (the workflow, each model call with its model and tokens, each tool with its
name), and a `tempi worker` serving the Temporal SDK's metrics for Prometheus."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port
from tests.conftest import run_tempi, tempi_env, write_models_json


def _spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_session_traced_to_a_file_has_workflow_llm_and_tool_spans(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "traced-session"
    scripted_server.add_scenario(
        scenario,
        [
            {
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "echo traced"}},
                    {"name": "shout", "arguments": {"text": "traced"}},
                ],
                "usage": {"input": 1234, "output": 56},
            },
            {"text": "done", "usage": {"input": 1400, "output": 7}},
        ],
    )
    write_models_json(home, scripted_server, scenario)
    traces = tmp_path / "spans.jsonl"
    env = tempi_env(home, temporal_address, TEMPI_OTEL_FILE=str(traces))
    # An extension's tool, beside the builtin one: every tool route has its span.
    extension = ["--extension", str(Path(__file__).parent / "extensions" / "guard.py")]
    proc = run_tempi(
        ["--mode", "json", "--model", "mock/mock-model", *extension, "-p", "run it"], cwd=work, env=env
    )
    assert proc.returncode == 0, proc.stderr
    spans = _spans(traces)
    names = [s["name"] for s in spans]
    assert "StartWorkflow:AgentSessionWorkflow" in names, names
    assert "RunWorkflow:AgentSessionWorkflow" in names, names

    llm = [s for s in spans if s["name"] == "chat mock-model"]
    assert len(llm) == 2, names
    assert all(s["attributes"]["gen_ai.request.model"] == "mock-model" for s in llm)
    tokens = sorted(
        (s["attributes"]["gen_ai.usage.input_tokens"], s["attributes"]["gen_ai.usage.output_tokens"])
        for s in llm
    )
    assert tokens == [(1234, 56), (1400, 7)]

    [tool] = [s for s in spans if s["name"] == "execute_tool bash"]
    assert tool["attributes"]["gen_ai.tool.name"] == "bash"
    assert tool["attributes"]["tempi.tool.is_error"] is False

    # One trace: the model calls and the tool hang under the session's workflow.
    [workflow] = [s for s in spans if s["name"] == "RunWorkflow:AgentSessionWorkflow"]
    assert {s["trace_id"] for s in [*llm, tool]} == {workflow["trace_id"]}
    by_id = {s["span_id"]: s for s in spans}
    # bash starts inside the workflow task, as a local activity.
    assert by_id[tool["parent_span_id"]]["name"] == "RunActivity:run_tool_briefly"
    [shout] = [s for s in spans if s["name"] == "execute_tool shout"]
    assert shout["attributes"]["tempi.tool.is_error"] is False
    assert by_id[shout["parent_span_id"]]["name"] == "RunActivity:call_extension_tool"
    assert all(s["service"] == "tempi" for s in spans)


class _OtlpCollector(ThreadingHTTPServer):
    """The receiving end of OTLP over HTTP: keeps what arrives at /v1/traces."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        super().__init__(("127.0.0.1", 0), _OtlpHandler)


class _OtlpHandler(BaseHTTPRequestHandler):
    server: _OtlpCollector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            self.server.requests.append(ExportTraceServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(ExportTraceServiceResponse().SerializeToString())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.slow  # the file exporter's test covers the spans; this one the standard endpoint
def test_a_session_traced_over_otlp_reaches_the_collector_before_tempi_exits(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "otlp-session"
    scripted_server.add_scenario(
        scenario,
        [{"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}, {"text": "read it"}],
    )
    (work / "notes.txt").write_text("notes\n")
    write_models_json(home, scripted_server, scenario)
    collector = _OtlpCollector()
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    try:
        env = tempi_env(
            home,
            temporal_address,
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_address[1]}",
            OTEL_SERVICE_NAME="tempi-team-a",
        )
        proc = run_tempi(["--model", "mock/mock-model", "-p", "read notes.txt"], cwd=work, env=env)
    finally:
        collector.shutdown()
    assert proc.returncode == 0, proc.stderr
    resources = [r for req in collector.requests for r in req.resource_spans]
    services = {
        a.value.string_value for r in resources for a in r.resource.attributes if a.key == "service.name"
    }
    assert services == {"tempi-team-a"}
    names = {span.name for r in resources for scope in r.scope_spans for span in scope.spans}
    # The last spans end as the process exits: they arrive only if tempi flushes before it goes.
    assert {"RunWorkflow:AgentSessionWorkflow", "chat mock-model", "execute_tool read"} <= names, names
    assert "RunActivity:flush_entries" in names, names


def test_worker_serves_temporal_metrics_when_asked(tmp_path: Path, temporal_address: str) -> None:
    port = free_port()
    env = tempi_env(tmp_path / "home", temporal_address, TEMPI_METRICS_ADDRESS=f"127.0.0.1:{port}")
    worker = subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker", "--task-queue", "metrics-check"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        deadline = time.monotonic() + 60
        while "polling" not in worker.stderr.readline():
            assert worker.poll() is None and time.monotonic() < deadline, "tempi worker did not start"
        metrics = ""
        while "temporal_" not in metrics and time.monotonic() < deadline:
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(30)
    assert "temporal_" in metrics
    assert 'task_queue="metrics-check"' in metrics


@pytest.mark.slow  # a worker's imports take most of its 15 s, for a one-line answer
def test_a_metrics_address_that_cannot_work_is_a_clear_error(tmp_path: Path, temporal_address: str) -> None:
    env = tempi_env(tmp_path / "home", temporal_address, TEMPI_METRICS_ADDRESS="9464")
    proc = run_tempi(["worker"], cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 3
    assert "TEMPI_METRICS_ADDRESS=9464 is not HOST:PORT" in proc.stderr, proc.stderr
