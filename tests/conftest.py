"""Shared rig: a real Temporal dev server, the scripted LLM server, isolated TEMPI_HOMEs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from tests import hermetic_home

# Before any tempi module reads HOME, TEMPI_HOME or PI_CODING_AGENT_DIR.
hermetic_home.isolate()

import pytest  # noqa: E402
from temporalio.client import Client  # noqa: E402

from tempi.testing.scripted_llm import ScriptedLLMServer  # noqa: E402
from tempi.workers.dev_server import free_port, start_dev_server  # noqa: E402
from tempi.workers.temporal_client import connect  # noqa: E402
from tests.fixture_paths import PI_FIXTURES as FIXTURES  # noqa: E402
from tests.processes import stop_process  # noqa: E402

# The slow end-to-end groups (many real `tempi` processes, a terminal, the background
# service, chaos, a 300-turn session) run in CI and on request; a plain `uv run pytest`
# keeps one end-to-end test of each kind of real part and stays fast.
FULL_SUITE = os.environ.get("TEMPI_FULL_TESTS") == "1" or os.environ.get("CI") == "true"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL_SUITE:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.stash[_DESELECTED_SLOW] = len(slow)


_DESELECTED_SLOW = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if FULL_SUITE:
        return
    # With several test processes the count is theirs; this one collected nothing.
    count = config.stash.get(_DESELECTED_SLOW, 0)
    terminalreporter.write_line(
        f"{count or 'The'} slow end-to-end tests were not run; TEMPI_FULL_TESTS=1 runs them (CI always does)."
    )


@pytest.fixture(autouse=True)
def _never_the_real_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Each test its own HOME, TEMPI_HOME and PI_CODING_AGENT_DIR; one that opens anything of
    the real user's ~/.tempi or ~/.pi fails."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TEMPI_HOME", str(home / ".tempi"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    seen = len(hermetic_home.touched)
    yield
    if len(hermetic_home.touched) > seen:
        pytest.fail(f"the test touched the real user's files: {sorted(set(hermetic_home.touched[seen:]))}")


@pytest.fixture(scope="session", autouse=True)
def _no_sandbox_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A session a test leaves idle keeps its docker sandbox until the idle stop (15 min), as
    it would for a user; at the end of this process, the sandboxes of every tempi home its
    tests made are removed, so CI's leftover check finds none."""
    yield
    from tempi.activities.sandbox.installation import INSTALLATION_FILE, INSTALLATION_LABEL

    roots = [tmp_path_factory.getbasetemp(), *([hermetic_home.ROOT] if hermetic_home.ROOT else [])]
    ids = {p.read_text().strip() for root in roots for p in root.rglob(INSTALLATION_FILE) if p.is_file()}
    if not ids:
        return
    try:
        import docker

        client = docker.from_env()
        for container in client.containers.list(all=True, filters={"label": INSTALLATION_LABEL}):
            if container.labels.get(INSTALLATION_LABEL) in ids:
                container.remove(force=True, v=True)
        client.close()
    except Exception as err:  # no engine, or it went away: nothing of ours can be running there
        print(f"tests: could not sweep sandbox containers: {err}", file=sys.stderr)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@contextlib.contextmanager
def dev_server_in(home: Path) -> Iterator[str]:
    """A Temporal dev server keeping its database and log in `home`: its address."""
    port = free_port()
    proc = start_dev_server(home / "temporal.db", port, log_path=home / "temporal.log")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dev_server_in(tmp_path_factory.mktemp("temporal")) as address:
        yield address


@pytest.fixture(scope="session")
async def temporal_client(temporal_address: str) -> AsyncIterator[Client]:
    yield await connect(temporal_address)


@pytest.fixture(scope="session")
def scripted_server() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        yield server
    finally:
        server.stop_thread()


def write_models_json(
    home: Path,
    server: ScriptedLLMServer,
    scenario: str,
    *,
    api: str = "openai-completions",
    provider: str = "mock",
    model_id: str = "mock-model",
    context_window: int = 128_000,
    more_models: tuple[str, ...] = (),
    reasoning: bool = False,
    cost: dict[str, float] | None = None,
) -> None:
    """A models.json whose `provider` serves `model_id` (and `more_models`, alike) from
    `scenario` on the scripted server."""
    home.mkdir(parents=True, exist_ok=True)
    models = [
        {
            "id": model,
            "name": model,
            "reasoning": reasoning,
            "input": ["text"],
            "cost": cost or {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
            "contextWindow": context_window,
            "maxTokens": 16384,
        }
        for model in (model_id, *more_models)
    ]
    provider_config = {
        "baseUrl": server.url_for(scenario, api),
        "api": api,
        "apiKey": "MOCK_API_KEY",
        "models": models,
    }
    (home / "models.json").write_text(json.dumps({"providers": {provider: provider_config}}))


def scripted_home(tmp_path: Path, server: ScriptedLLMServer, name: str, scenario: Any) -> Path:
    """`tmp_path/home`, its models.json naming the scripted model that answers from
    `scenario` (added to `server` as `name`)."""
    server.add_scenario(name, scenario)
    home = tmp_path / "home"
    write_models_json(home, server, name)
    return home


def trust_project_as(home: Path, project: Path) -> None:
    """Record, in `home`'s records, the owner's trust in `project`'s .tempi/ as it is now
    (what `tempi --trust` there does)."""
    from tempi.config.project_trust import trust_project

    before = os.environ.get("TEMPI_HOME")
    os.environ["TEMPI_HOME"] = str(home)
    try:
        trust_project(project)
    finally:
        if before is None:
            os.environ.pop("TEMPI_HOME", None)
        else:
            os.environ["TEMPI_HOME"] = before


def tempi_env(home: Path, temporal_address: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "ANTHROPIC_", "OPENAI_"))}
    env["TEMPI_HOME"] = str(home)
    # tempi reads pi's ~/.pi/agent where its own home lacks a file: keep the machine's out.
    env["PI_CODING_AGENT_DIR"] = str(home / ".no-pi-agent")
    env["MOCK_API_KEY"] = "sk-mock-secret-key-12345"
    if temporal_address:
        env["TEMPORAL_ADDRESS"] = temporal_address
        # The test's server has no other worker: the command runs its sessions itself.
        env["TEMPI_CLIENT_WORKER"] = "1"
    env.update(extra)
    return env


def start_tempi_worker(
    home: Path, address: str, queue: str, log: Path, **extra_env: str
) -> subprocess.Popen[bytes]:
    """A `tempi worker` process on `queue`, its output appended to `log`: the worker a test
    kills and starts again."""
    return subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker", "--task-queue", queue],
        env=tempi_env(home, address, **extra_env),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def run_tempi(
    args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tempi", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input if input is not None else "",
    )
