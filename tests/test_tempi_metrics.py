"""A worker serving metrics (TEMPI_METRICS_ADDRESS) serves tempi's own beside the SDK's: the
tokens, cost, latency and stop reasons of model calls per model, and tool calls with their
errors per tool, as a dashboard would chart them after a scripted session."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx
import yaml
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import scripted_model, start_session, unique_queue


def _value(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in metrics.splitlines():
        match = re.match(rf"{name}(?:_total)?\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


async def test_a_session_shows_in_the_workers_metrics(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "tempi-metrics"
    scripted_server.add_scenario(
        scenario,
        [
            {
                "tool_calls": [{"name": "bash", "arguments": {"command": "exit 3"}}],
                "usage": {"input": 1234, "output": 56},
            },
            {
                "tool_calls": [{"name": "bash", "arguments": {"command": "true"}}],
                "usage": {"input": 1300, "output": 20},
            },
            {"text": "done", "usage": {"input": 1400, "output": 7}},
        ],
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    port = free_port()
    queue = unique_queue()
    worker = start_tempi_worker(
        home, temporal_address, queue, tmp_path / "worker.log", TEMPI_METRICS_ADDRESS=f"127.0.0.1:{port}"
    )
    try:
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("Run them.", timeout=120)
        await s.run_to_idle(timeout=120)
        metrics = ""
        deadline = time.monotonic() + 30
        while _value(metrics, "tempi_llm_calls") < 3 and time.monotonic() < deadline:
            metrics = (await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{port}/metrics")).text
            await asyncio.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(30)

    model = {"model": "mock-model", "provider": "mock"}
    assert _value(metrics, "tempi_llm_tokens", kind="input", **model) == 1234 + 1300 + 1400
    assert _value(metrics, "tempi_llm_tokens", kind="output", **model) == 56 + 20 + 7
    assert _value(metrics, "tempi_llm_calls", stop_reason="toolUse", **model) == 2
    assert _value(metrics, "tempi_llm_calls", stop_reason="stop", **model) == 1
    assert _value(metrics, "tempi_llm_call_duration_count", **model) == 3
    assert _value(metrics, "tempi_tool_calls", tool="bash", is_error="true") == 1
    assert _value(metrics, "tempi_tool_calls", tool="bash", is_error="false") == 1


def test_the_example_alerts_and_the_collector_use_the_metrics_tempi_serves() -> None:
    root = Path(__file__).resolve().parent.parent
    served = set(re.findall(r'"(tempi_\w+)"', (root / "tempi/activities/metrics.py").read_text()))
    rules = yaml.safe_load((root / "deploy/prometheus/tempi-alerts.yaml").read_text())
    used = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"tempi_\w+", rule["expr"])
    }
    assert used and used <= served, used - served
    collector = yaml.safe_load((root / "deploy/compose/otel-collector.yaml").read_text())
    assert "prometheus" in collector["service"]["pipelines"]["metrics"]["receivers"]
    [scrape] = collector["receivers"]["prometheus"]["config"]["scrape_configs"]
    assert scrape["static_configs"][0]["targets"] == ["worker:9464"]
