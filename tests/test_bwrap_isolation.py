"""The bwrap sandbox holds against a hostile model, also when the worker runs as root:
no capabilities, nothing outside the workspace to write or read, file tools that cannot
be steered out of the workspace by symlinks, and limits on memory and processes."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tempi.activities.tools import ToolContext, ToolOutcome, bwrap_cgroup, execute_tool
from tempi.activities.tools.bwrap_backend import BwrapBackend


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def _bwrap_ctx(workspace: Path, tmp_path: Path) -> ToolContext:
    """A sandbox made now, with the limits the environment says now."""
    return ToolContext(
        cwd=str(workspace), backend=BwrapBackend(str(workspace)), spill_dir=str(tmp_path / "spill")
    )


@pytest.fixture
def ctx(workspace: Path, tmp_path: Path) -> ToolContext:
    return _bwrap_ctx(workspace, tmp_path)


async def _bash(ctx: ToolContext, command: str) -> ToolOutcome:
    return await execute_tool("bash", {"command": command}, ctx)


# -- item 2: no privileges, nothing of the host beyond what commands need -----------------


async def test_commands_run_unprivileged_and_cannot_remount(ctx: ToolContext) -> None:
    marker = f"tempi-escape-{uuid.uuid4().hex}"
    targets = [Path("/etc") / marker, Path("/usr") / marker]
    try:
        result = await _bash(
            ctx,
            "id -u; grep CapEff /proc/self/status; "
            "for dir in / /etc /usr; do mount -o remount,rw $dir 2>/dev/null; done; "
            f"echo x > /etc/{marker}; echo x > /usr/{marker}; true",
        )
        lines = _text(result).splitlines()
        assert lines[0] != "0", "the sandboxed command runs as root"
        assert lines[1].split()[-1] == "0000000000000000", "the sandboxed command keeps capabilities"
        assert not any(target.exists() for target in targets)
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


@pytest.fixture
def host_socket() -> Iterator[str]:
    """A listening Unix socket in /run, where daemons such as Docker keep theirs."""
    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run to place a socket like the Docker daemon's")
    path = f"/run/tempi-probe-{uuid.uuid4().hex}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    try:
        yield path
    finally:
        server.close()
        os.unlink(path)


async def test_host_sockets_are_not_reachable(ctx: ToolContext, workspace: Path, host_socket: str) -> None:
    (workspace / "probe.py").write_text(
        "import socket, sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        socket.socket(socket.AF_UNIX).connect(path)\n"
        "        print('reached', path)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    sockets = [host_socket, "/var/run/docker.sock", "/run/docker.sock"]
    result = await _bash(ctx, f"python3 probe.py {' '.join(sockets)}; ls /run /var/run 2>&1")
    assert "reached" not in _text(result), _text(result)
    assert "docker.sock" not in _text(result) and "tempi-probe" not in _text(result)


@pytest.fixture
def home_secret() -> Iterator[tuple[str, Path]]:
    """A file in the worker's real home, like ~/.tempi/models.json."""
    secret = f"secret-{uuid.uuid4().hex}"
    path = Path.home() / f".tempi-bwrap-probe-{uuid.uuid4().hex}"
    path.write_text(secret)
    try:
        yield secret, path
    finally:
        path.unlink(missing_ok=True)


async def test_files_outside_the_workspace_cannot_be_read(
    ctx: ToolContext, home_secret: tuple[str, Path]
) -> None:
    secret, path = home_secret
    read = await execute_tool("read", {"path": f"~/{path.name}"}, ctx)
    assert read.is_error and secret not in _text(read)
    assert secret not in _text(await _bash(ctx, f"cat {path}; cat ~/{path.name}"))
    assert secret not in _text(await execute_tool("grep", {"pattern": secret, "path": str(path)}, ctx))
    listing = await execute_tool("ls", {"path": str(path.parent)}, ctx)
    assert path.name not in _text(listing)
    # /etc is there for commands, without what other users may not read.
    shadow = await _bash(ctx, "cat /etc/shadow; head -c 100 /etc/passwd")
    assert "root:x:0:0" in _text(shadow) and "root:$" not in _text(shadow) and "root:*" not in _text(shadow)


async def test_models_json_is_hidden_even_inside_the_workspace(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = workspace / "conf"
    config.mkdir()
    (config / "models.json").write_text('{"key": "sk-secret-in-models"}')
    monkeypatch.setenv("TEMPI_HOME", str(config))
    ctx = _bwrap_ctx(workspace, tmp_path)
    read = await execute_tool("read", {"path": "conf/models.json"}, ctx)
    assert "sk-secret" not in _text(read)
    assert "sk-secret" not in _text(await _bash(ctx, "cat conf/models.json; grep -r sk-secret . ; true"))
    write = await execute_tool("write", {"path": "conf/models.json", "content": "{}"}, ctx)
    assert "sk-secret" in (config / "models.json").read_text(), _text(write)


async def test_files_commands_create_belong_to_the_worker(ctx: ToolContext, workspace: Path) -> None:
    result = await _bash(ctx, "mkdir -p sub && echo one > sub/a.txt && chmod 600 sub/a.txt && id -u")
    assert not result.is_error, _text(result)
    assert (await execute_tool("write", {"path": "sub/b.txt", "content": "two"}, ctx)).is_error is False
    for path in (workspace / "sub", workspace / "sub" / "a.txt", workspace / "sub" / "b.txt"):
        assert path.stat().st_uid == os.getuid()
        assert path.stat().st_gid == os.getgid()
    (workspace / "sub" / "a.txt").write_text("changed by the worker\n")
    edit = await execute_tool(
        "edit", {"path": "sub/a.txt", "edits": [{"oldText": "changed", "newText": "edited"}]}, ctx
    )
    assert not edit.is_error, _text(edit)
    assert _text(await _bash(ctx, "cat sub/a.txt sub/b.txt && rm -r sub && echo gone")) == (
        "edited by the worker\ntwogone\n"
    )


# -- item 3: file tools cannot be steered out of the workspace ---------------------------


@pytest.mark.slow
async def test_writes_never_land_outside_while_a_symlink_is_swapped_in(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = workspace / "d"
    stop = threading.Event()

    def swap() -> None:
        # What a bash call in the same turn can do: replace a directory by a symlink out
        # of the workspace and back, as fast as it can.
        while not stop.is_set():
            link.mkdir(exist_ok=True)
            shutil.rmtree(link, ignore_errors=True)
            try:
                link.symlink_to(outside)
            except FileExistsError:
                continue
            link.unlink()

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        for attempt in range(60):
            await execute_tool("write", {"path": f"d/f{attempt}.txt", "content": "x"}, ctx)
            await execute_tool("write", {"path": f"d/sub/f{attempt}.txt", "content": "x"}, ctx)
            assert list(outside.iterdir()) == [], f"a write landed outside after {attempt} attempts"
    finally:
        stop.set()
        swapper.join()
    assert list(outside.iterdir()) == []


# -- item 17: limits ---------------------------------------------------------------------


async def test_a_huge_allocation_fails_inside_without_harming_the_worker(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPI_BWRAP_MEMORY_MB", "512")
    ctx = _bwrap_ctx(workspace, tmp_path)
    hog = await _bash(ctx, "python3 -c 'b = bytearray(2 << 30); print(\"allocated\")'")
    assert hog.is_error and "allocated" not in _text(hog) and "MemoryError" in _text(hog)
    # The worker and later calls are unaffected.
    after = await _bash(ctx, "echo still-here")
    assert _text(after) == "still-here\n"
    assert len(bytearray(64 << 20)) == 64 << 20


async def test_limits_have_host_sized_defaults_and_can_be_configured(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def backend_ctx() -> ToolContext:
        return ToolContext(
            cwd=str(workspace), backend=BwrapBackend(str(workspace)), spill_dir=str(tmp_path / "s")
        )

    host_kib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    default = _text(await _bash(backend_ctx(), "ulimit -v; ulimit -u")).split()
    assert default == [str(host_kib), "4096"]
    monkeypatch.setenv("TEMPI_BWRAP_MEMORY_MB", "300")
    monkeypatch.setenv("TEMPI_BWRAP_MAX_PROCESSES", "64")
    configured = _text(await _bash(backend_ctx(), "ulimit -v; ulimit -u; ulimit -Hv")).split()
    assert configured == [str(300 * 1024), "64", str(300 * 1024)]


@pytest.mark.skipif(
    os.getuid() == 0 and not bwrap_cgroup.available(),
    reason="as root the process limit needs a pids cgroup this worker can create",
)
async def test_a_fork_bomb_is_bounded(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPI_BWRAP_MAX_PROCESSES", "40")
    ctx = _bwrap_ctx(workspace, tmp_path)
    # A fork bomb with a bound, so that it cannot take the test machine down if unlimited.
    (workspace / "bomb.py").write_text(
        "import os, time\n"
        "children = 0\n"
        "try:\n"
        "    for _ in range(300):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        children += 1\n"
        "except OSError as err:\n"
        "    print('fork failed after', children, err)\n"
        "else:\n"
        "    print('forked', children)\n"
    )
    bomb = await _bash(ctx, "python3 bomb.py")
    assert "fork failed after" in _text(bomb) and "Resource temporarily unavailable" in _text(bomb)
    assert _text(await _bash(ctx, "echo still-here")) == "still-here\n"


async def test_credential_files_stay_hidden_when_the_workspace_is_the_home(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: run from $HOME, the model read ~/.git-credentials, ~/.npmrc, gh's token,
    shell history and ~/.env."""
    monkeypatch.setenv("HOME", str(workspace))
    secrets = [".git-credentials", ".npmrc", ".config/gh/hosts.yml", ".bash_history", ".env", ".pypirc"]
    for name in secrets:
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"token-in-{name.replace('/', '-')}\n")
    (workspace / "notes.txt").write_text("plain notes\n")
    ctx = _bwrap_ctx(workspace, tmp_path)
    shown = _text(
        await _bash(
            ctx,
            "cat notes.txt; for f in " + " ".join(secrets) + "; do cat $f; done; grep -rs token- . ; true",
        )
    )
    assert "plain notes" in shown
    assert "token-in" not in shown, shown
    for name in secrets:
        assert "token-in" not in _text(await execute_tool("read", {"path": name}, ctx))


@pytest.mark.skipif(
    not bwrap_cgroup.available("memory"), reason="needs a memory cgroup this worker can create"
)
async def test_processes_of_one_command_share_its_memory_limit(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: the limit was per process, so four processes under it took four times it."""
    monkeypatch.setenv("TEMPI_BWRAP_MEMORY_MB", "300")
    ctx = _bwrap_ctx(workspace, tmp_path)
    hold = "import time; b = b'x' * (150 << 20); time.sleep(2); print('held')"
    outcome = await _bash(ctx, f'for i in 1 2 3 4; do python3 -c "{hold}" & done; wait; echo finished')
    text = _text(outcome)
    assert "finished" in text and text.splitlines().count("held") < 4 and "Killed" in text, text
    assert _text(await _bash(ctx, "echo still-here")) == "still-here\n"
