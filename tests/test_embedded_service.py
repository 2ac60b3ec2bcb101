"""The embedded default: no TEMPORAL_ADDRESS, so `tempi` starts a shared background
service (dev server + worker) that outlives the terminal and stops itself when idle."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.service import read_info
from tests.conftest import run_tempi, tempi_env, write_models_json

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_service_is_shared_survives_its_client_and_stops(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "embedded",
        {
            "select": "sequential",
            "turns": [
                {"text": "first answer"},
                {"text": "slow " * 60, "chunk_size": 5, "chunk_delay_ms": 40},
            ],
        },
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "embedded")
    env = tempi_env(home, None)
    try:
        first = run_tempi(["--model", "mock/mock-model", "-p", "hello"], cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        assert first.stdout == "first answer\n"
        assert "starting the background Temporal server" in first.stderr
        info = read_info(home)
        assert info is not None
        status = run_tempi(["server", "status"], cwd=tmp_path, env=env)
        assert f"running at {info.address}" in status.stdout

        # A client killed mid-run does not stop its session: the service finishes it.
        client = subprocess.Popen(
            [sys.executable, "-m", "tempi", "--continue", "--mode", "json", "-p", "talk slowly"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert client.stdout is not None
        for line in client.stdout:
            if json.loads(line)["type"] == "message_update":
                break
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
        session_file = next((home / "sessions").rglob("*.jsonl"))

        def finished() -> bool:
            texts = [
                json.loads(x).get("message", {}).get("content", [{}])
                for x in session_file.read_text().splitlines()
            ]
            return any(c and c[0].get("text", "").startswith("slow slow") for c in texts)

        _wait_for(finished, 60, "the session to finish without its client")
        assert read_info(home).pid == info.pid  # type: ignore[union-attr]  # the same shared service

        stop = run_tempi(["server", "stop"], cwd=tmp_path, env=env)
        assert "stopped" in stop.stdout
        assert read_info(home) is None
    finally:
        run_tempi(["server", "stop"], cwd=tmp_path, env=env)


def test_service_stops_itself_when_idle(tmp_path: Path, scripted_server: ScriptedLLMServer) -> None:
    home = tmp_path / "home"
    env = tempi_env(home, None, TEMPI_SERVER_IDLE_MINUTES="0.05")
    try:
        proc = run_tempi(["--model", "faux/demo", "-p", "look around"], cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "offline demo" in proc.stdout
        info = read_info(home)
        assert info is not None
        _wait_for(lambda: read_info(home) is None, 30, "the idle service to stop")
        _wait_for(lambda: not Path(f"/proc/{info.pid}").exists(), 15, "the service process to exit")
    finally:
        run_tempi(["server", "stop"], cwd=tmp_path, env=env)


def _dev_servers_on(db: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"start-dev" in argv and str(db).encode() in argv and state != "Z":
            pids.append(int(entry.name))
    return pids


def _tree(root: int) -> set[int]:
    """`root` and all its descendants."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def _listening_tcp_ports(pids: set[int]) -> list[int]:
    """TCP ports that these processes listen on in this network namespace."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(set(ports))


def _list_workflows(
    address: str, *, as_uid: int | None, config_home: Path
) -> subprocess.CompletedProcess[str]:
    """`temporal workflow list` against `address`, as this user or as `as_uid`."""
    temporal = str(Path(sys.executable).parent / "temporal")
    command = [temporal, "workflow", "list", "--address", address, "--command-timeout", "5s", "-o", "json"]
    if as_uid is not None:
        command = ["setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups", *command]
    env = {"PATH": os.environ["PATH"], "HOME": str(config_home)}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)


NOBODY = 65534


def test_other_local_users_cannot_reach_the_background_server(tmp_path: Path) -> None:
    # Another user probes what the service opened: every TCP port its processes listen on
    # here, and the address it recorded. The same probe run by the owner must find the session.
    base = Path(tempfile.mkdtemp(prefix="tempi-iso-"))
    try:
        base.chmod(0o755)  # a home others may traverse and read, as with a careless umask
        home = base / "home"
        home.mkdir(mode=0o755)
        home.chmod(0o755)
        config_home = base / "probe-home"
        config_home.mkdir(mode=0o777)
        config_home.chmod(0o777)
        env = tempi_env(home, None)
        try:
            first = run_tempi(["--model", "faux/demo", "-p", "look around"], cwd=tmp_path, env=env)
            assert first.returncode == 0, first.stderr
            info = read_info(home)
            assert info is not None
            candidates = [f"127.0.0.1:{port}" for port in _listening_tcp_ports(_tree(info.pid))]
            candidates.append(info.address)

            owner = _list_workflows(info.address, as_uid=None, config_home=config_home)
            assert owner.returncode == 0, owner.stderr
            assert "AgentSession" in owner.stdout, owner.stdout

            for address in candidates:
                probe = _list_workflows(address, as_uid=NOBODY, config_home=config_home)
                assert probe.returncode != 0 and "AgentSession" not in probe.stdout, (
                    f"another user listed this user's sessions at {address}: {probe.stdout[:300]}"
                )
        finally:
            run_tempi(["server", "stop"], cwd=tmp_path, env=env)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_killed_service_leaves_no_second_dev_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = tempi_env(home, None)
    db = (home / "temporal.db").resolve()
    try:
        first = run_tempi(["--model", "faux/demo", "-p", "look around"], cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        info = read_info(home)
        assert info is not None
        assert len(_dev_servers_on(db)) == 1

        os.kill(info.pid, signal.SIGKILL)
        _wait_for(lambda: not Path(f"/proc/{info.pid}").exists(), 15, "the killed service to go")

        second = run_tempi(["--model", "faux/demo", "-p", "look again"], cwd=tmp_path, env=env)
        assert second.returncode == 0, second.stderr
        assert "offline demo" in second.stdout
        again = read_info(home)
        assert again is not None and again.pid != info.pid
        servers = _dev_servers_on(db)
        assert len(servers) == 1, f"{len(servers)} dev servers run on {db}: {servers}"
        sqlite_busy = (home / "logs" / "temporal.log").read_text(errors="replace").count("SQLITE_BUSY")
        assert sqlite_busy == 0
    finally:
        run_tempi(["server", "stop"], cwd=tmp_path, env=env)
        for pid in _dev_servers_on(db):  # what a failing run left: only this test's servers
            os.kill(pid, signal.SIGKILL)


def _services_of(home: Path) -> list[int]:
    """The background service processes of `home` (started early or on demand)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"tempi.workers.service" in argv and str(home).encode() in argv:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [(["-p"], 1, "Nothing to do"), (["--no-such-flag", "-p", "hi"], 2, "--no-such-flag")],
)
def test_a_command_that_fails_before_its_session_leaves_no_server(
    tmp_path: Path, argv: list[str], code: int, said: str
) -> None:
    """The service starts as the command starts, ahead of need; a command that then fails
    (nothing to do, a mistyped flag) must not leave it running for its idle half hour."""
    home = tmp_path / "home"
    env = tempi_env(home, None)
    try:
        proc = run_tempi(argv, cwd=tmp_path, env=env)
        assert proc.returncode == code, proc.stderr
        assert said in proc.stderr
        _wait_for(lambda: not _services_of(home), 20, "the service started for nothing to stop")
        assert read_info(home) is None
    finally:
        for pid in _services_of(home):
            os.kill(pid, signal.SIGKILL)


def test_a_client_of_the_service_loads_no_worker_or_provider_code(tmp_path: Path) -> None:
    """The service runs the worker; a `tempi -p` beside it is only a client, and loading a
    provider SDK or the worker would cost it seconds of start-up."""
    home = tmp_path / "home"
    env = tempi_env(home, None)
    try:
        first = run_tempi(["--model", "faux/demo", "-p", "look around"], cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "tempi", "--model", "faux/demo", "-p", "again"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            input="",
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "offline demo" in proc.stdout
        loaded = {
            line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "import time:" in line
        }
        assert "tempi.cli.main" in loaded  # the listing is what it should be
        unwanted = (
            "anthropic",
            "openai",
            "mcp",
            "docker",
            "PIL",
            "temporalio.worker",
            "tempi.workers.worker",
        )
        unwanted += ("tempi.activities",)
        found = sorted(m for m in loaded if m.split(".")[0] in unwanted or m.startswith(unwanted))
        assert found == []
    finally:
        run_tempi(["server", "stop"], cwd=tmp_path, env=env)
