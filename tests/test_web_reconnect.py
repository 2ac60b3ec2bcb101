"""`tempi web` while its Temporal server goes away and comes back: the background service
(no TEMPORAL_ADDRESS) stopped with `tempi server stop --force` and started again, a real
console and a page's event stream over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.processes import stop_process
from tests.web_rig import Console, console_url, kept_session


@pytest.fixture
def service_home(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    env = tempi_env(home, None)
    try:
        yield home, work, env
    finally:
        run_tempi(["server", "stop", "--force"], cwd=work, env=env)


async def _ops_until(stream: aiohttp.ClientResponse, done: Any, timeout: float = 60) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while not done(ops):
            line = (await stream.content.readline()).decode()
            if not line:
                raise AssertionError(f"the event stream ended; it had sent {ops}")
            if line.startswith("data: "):
                ops.append(json.loads(line[len("data: ") :]))
    return ops


def _answer_shown(ops: list[dict[str, Any]], text: str) -> bool:
    return any(text in op.get("html", "") for op in ops) and any(
        op.get("op") == "state" and op.get("running") for op in ops
    )


async def test_a_pages_stream_says_the_server_is_gone_and_resumes_after_its_restart(
    service_home: tuple[Path, Path, dict[str, str]], scripted_server: ScriptedLLMServer
) -> None:
    home, work, env = service_home
    scripted_server.add_scenario(
        "web-reconnect",
        {"select": "sequential", "turns": [{"text": "Before the restart."}, {"text": "After the restart."}]},
    )
    write_models_json(home, scripted_server, "web-reconnect")
    session_id = kept_session("one", cwd=work, env=env)

    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "web", "--port", "0"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        console = Console(proc, *console_url(proc))
        headers = {"X-Tempi-Token": console.token}
        url = f"{console.base}/api/sessions/{session_id}/events"
        async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as stream:
            await _ops_until(stream, lambda ops: _answer_shown(ops, "Before the restart."))

            forced = await asyncio.to_thread(run_tempi, ["server", "stop", "--force"], cwd=work, env=env)
            assert forced.returncode == 0, forced.stderr
            # The page hears the server is gone, on the stream it has open.
            await _ops_until(stream, lambda ops: {"op": "offline"} in ops)

            started = await asyncio.to_thread(run_tempi, ["server", "start"], cwd=work, env=env)
            assert started.returncode == 0, started.stderr
            # The same stream starts again from a reset once the server answers.
            ops = await _ops_until(stream, lambda ops: _answer_shown(ops, "Before the restart."))
            assert {"op": "reset"} in ops

            again = await asyncio.to_thread(
                run_tempi, ["--continue", "--mode", "json", "-p", "two"], cwd=work, env=env
            )
            assert again.returncode == 0, again.stderr
            # A run this short may start and end between two looks: its answer shows all the same.
            await _ops_until(
                stream, lambda ops: any("After the restart." in op.get("html", "") for op in ops)
            )
    finally:
        stop_process(proc)
