"""The processes a benchmark or chaos run needs, each on loopback and in its own temp dir:
a Temporal dev server, the scripted LLM server, tempi workers, and tempi's own CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tempi.workers.dev_server import free_port, port_open, start_dev_server

PYTHON = sys.executable
PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROVIDER = "mock"
MODEL_ID = "mock-model"
API = "openai-completions"
API_KEY_ENV = "MOCK_API_KEY"
API_KEY = "sk-bench-not-a-secret"


def scripted_url(base_url: str, scenario: str, api: str = API) -> str:
    """The scripted server's address for one scenario (its `url_for`, without the server)."""
    return f"{base_url}/s/{scenario}/v1" if api.startswith("openai") else f"{base_url}/s/{scenario}"


def provider_entry(url: str) -> dict[str, Any]:
    """A models.json provider with the one mock model, served at `url`."""
    return {
        "baseUrl": url,
        "api": API,
        "apiKey": API_KEY_ENV,
        "models": [
            {
                "id": MODEL_ID,
                "name": MODEL_ID,
                "reasoning": False,
                "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 200_000,
                "maxTokens": 16384,
            }
        ],
    }


def models_json(base_url: str, scenario: str) -> dict[str, Any]:
    """One provider `mock` with one model, in the models.json format tempi and pi share."""
    return {"providers": {PROVIDER: provider_entry(scripted_url(base_url, scenario))}}


def write_models_json(config_dir: Path, base_url: str, scenario: str) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "models.json").write_text(json.dumps(models_json(base_url, scenario), indent=2))


def clean_env(
    home: Path | None = None, address: str | None = None, *, project: Path = PROJECT_ROOT, **extra: str
) -> dict[str, str]:
    """The environment for a tempi (or pi) child: no real provider keys, no inherited
    Temporal settings, the mock key set, tempi imported from `project`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TEMPORAL_", "ANTHROPIC_", "OPENAI_", "TEMPI_"))
    }
    env[API_KEY_ENV] = API_KEY
    env["PYTHONPATH"] = str(project)
    if home is not None:
        env["TEMPI_HOME"] = str(home)
    if address:
        env["TEMPORAL_ADDRESS"] = address
        env["TEMPI_CLIENT_WORKER"] = "1"  # as before clients stopped running workers unasked
    env.update(extra)
    return env


def bytecode_cache_in_use() -> bool:
    """Whether the tempi processes a benchmark starts keep compiled modules between runs, as
    a normal install does. Without a cache each process compiles everything it imports,
    ~0.4 s of every `tempi -p` here, which swamps start-up and whole-session times."""
    return not os.environ.get("PYTHONDONTWRITEBYTECODE")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of one process and all its descendants."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            total += cpu_seconds(int(child))
        except FileNotFoundError:
            continue  # ended since the listing
    return total


def wait_for_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not port_open(port):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with code {proc.returncode} before port {port} opened")
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listened on port {port} within {timeout_s} s")
        time.sleep(0.05)


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class DevServer:
    """A Temporal dev server that can be stopped and started again on the same db and port."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the dev server is not running"
        return self.proc.pid

    def start(self) -> None:
        self.proc = start_dev_server(
            self.directory / "temporal.db", self.port, log_path=self.directory / "temporal.log"
        )

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
            self.proc.wait()
        else:
            stop_process(self.proc, 20)
        self.proc = None
        # The port must be free before a restart can bind it again.
        deadline = time.monotonic() + 20
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def __enter__(self) -> DevServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


class ScriptedServerProcess:
    """The scripted LLM server in a process of its own, so its work never competes with the
    process being measured for the GIL. Scenarios are fixed at start. With `record`, every
    request and when it came and was answered go to that JSON-lines file."""

    def __init__(self, directory: Path, scenarios: dict[str, Any], *, record: Path | None = None) -> None:
        self.directory = directory
        self.record = record
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        scenario_dir = directory / "scenarios"
        scenario_dir.mkdir(parents=True, exist_ok=True)
        for name, scenario in scenarios.items():
            (scenario_dir / f"{name}.json").write_text(json.dumps(scenario))
        self.scenario_dir = scenario_dir

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, scenario: str, api: str = API) -> str:
        return scripted_url(self.base_url, scenario, api)

    def __enter__(self) -> ScriptedServerProcess:
        log = open(self.directory / "scripted.log", "ab")
        self.proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "tempi.testing.scripted_llm",
                "--port",
                str(self.port),
                "--scenarios",
                str(self.scenario_dir),
                *(["--record", str(self.record)] if self.record is not None else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=clean_env(),
        )
        wait_for_port(self.port, 30, self.proc)
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)


class RssSampler:
    """Samples a process's resident memory; `peak_kb` is the larger of the samples and
    the kernel's high-water mark (VmHWM)."""

    def __init__(self, pid: int, interval_s: float = 0.1) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> dict[str, int]:
        values: dict[str, int] = {}
        with contextlib.suppress(OSError), open(f"/proc/{self.pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0])
        return values

    def _run(self) -> None:
        while not self._stop.is_set():
            values = self._read()
            self.peak_kb = max(self.peak_kb, *values.values(), 0)
            self._stop.wait(self.interval_s)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> int:
        values = self._read()
        self.peak_kb = max(self.peak_kb, *values.values(), 0)
        self._stop.set()
        self._thread.join()
        return self.peak_kb


class WorkerProcess:
    """A tempi worker in its own process: `python -m tempi worker`, or bench's timed
    worker when `timings` is given (same worker, plus an activity timing log). Its code
    comes from `project`, a tempi checkout (this one unless told)."""

    def __init__(
        self,
        home: Path,
        address: str,
        task_queue: str,
        *,
        log: Path,
        timings: Path | None = None,
        profile: Path | None = None,
        project: Path = PROJECT_ROOT,
    ) -> None:
        self.home = home
        self.project = project
        self.address = address
        self.task_queue = task_queue
        self.log = log
        self.timings = timings
        self.profile = profile
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        if self.timings is not None:
            args = [
                PYTHON,
                "-m",
                "bench.timed_worker",
                "--task-queue",
                self.task_queue,
                "--timings",
                str(self.timings),
            ]
            if self.profile is not None:
                args += ["--profile", str(self.profile)]
        else:
            args = [PYTHON, "-m", "tempi", "worker", "--task-queue", self.task_queue]
        self.proc = subprocess.Popen(
            args,
            env=clean_env(self.home, self.address, project=self.project),
            stdout=open(self.log, "ab"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.project,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_ready(self, timeout_s: float = 60) -> None:
        """Until the worker says it polls (its first log line)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with code {self.proc.returncode}; see {self.log}")
            if self.log.exists() and b"polling" in self.log.read_bytes():
                return
            time.sleep(0.05)
        raise RuntimeError(f"worker not ready within {timeout_s} s; see {self.log}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, 30)


@contextlib.contextmanager
def running(worker: WorkerProcess) -> Iterator[WorkerProcess]:
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def tempi_command(*args: str) -> list[str]:
    return [PYTHON, "-m", "tempi", *args]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
