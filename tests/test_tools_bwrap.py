"""The bwrap backend: tools work inside the workspace, and nothing else is writable or
reachable over the network."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tempi.activities.tools.bwrap_backend import BwrapBackend


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return ToolContext(
        cwd=str(workspace), backend=BwrapBackend(str(workspace)), spill_dir=str(tmp_path / "spill")
    )


@pytest.fixture
def listening_port() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


async def test_tools_work_inside_the_workspace(ctx: ToolContext) -> None:
    assert not (await execute_tool("write", {"path": "a.txt", "content": "one\ntwo\n"}, ctx)).is_error
    edit = await execute_tool("edit", {"path": "a.txt", "edits": [{"oldText": "two", "newText": "2"}]}, ctx)
    assert not edit.is_error
    assert _text(await execute_tool("read", {"path": "a.txt"}, ctx)) == "one\n2\n"
    bash = await execute_tool("bash", {"command": "echo made-by-bash > b.txt && cat a.txt b.txt"}, ctx)
    assert _text(bash) == "one\n2\nmade-by-bash\n"
    assert "a.txt:1: one" in _text(await execute_tool("grep", {"pattern": "one"}, ctx))
    assert "b.txt" in _text(await execute_tool("find", {"pattern": "*.txt"}, ctx))
    assert _text(await execute_tool("ls", {}, ctx)).splitlines() == ["a.txt", "b.txt"]


@pytest.fixture(params=["real-home", "home-under-tmp"])
def home(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The worker's home: the real one, or one under /tmp (which the sandbox makes private)."""
    if request.param == "home-under-tmp":
        fake = tmp_path / "home"
        fake.mkdir()
        monkeypatch.setenv("HOME", str(fake))
        return fake
    return Path.home()


async def test_writes_outside_the_workspace_fail(ctx: ToolContext, tmp_path: Path, home: Path) -> None:
    outside = tmp_path / "outside.txt"
    write = await execute_tool("write", {"path": str(outside), "content": "x"}, ctx)
    assert write.is_error
    assert not outside.exists()
    # Whatever a command writes outside the workspace (the home, /tmp, a symlink out of
    # the workspace) may succeed in the sandbox's private copies but never reaches the host.
    host_path = home / f".tempi-bwrap-probe-{uuid.uuid4().hex}"
    try:
        await execute_tool("bash", {"command": f"echo x > {host_path}"}, ctx)
        assert not host_path.exists()
    finally:
        host_path.unlink(missing_ok=True)
    private = await execute_tool("bash", {"command": f"echo x > {outside} && cat {outside}"}, ctx)
    assert _text(private) == "x\n" and not outside.exists()
    escape = await execute_tool("bash", {"command": "ln -s / root && echo y > root/etc/tempi-escape"}, ctx)
    assert escape.is_error
    assert not Path("/etc/tempi-escape").exists()


async def test_no_network_inside_the_sandbox(ctx: ToolContext, listening_port: int) -> None:
    probe = (
        f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {listening_port}), timeout=2)'"
    )
    # The same probe reaches the port from outside the sandbox...
    local = await execute_tool("bash", {"command": probe}, ToolContext(cwd=ctx.cwd))
    assert not local.is_error, _text(local)
    # ...and fails inside it.
    sandboxed = await execute_tool("bash", {"command": probe}, ctx)
    assert sandboxed.is_error
    assert "Network is unreachable" in _text(sandboxed) or "refused" in _text(sandboxed)
