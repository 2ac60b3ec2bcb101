"""The seven tools against the docker backend, in a real container from the sandbox image.

The workspace is a host directory bind-mounted at /workspace, so the tests set files up
and check results on the host while the tools work inside the container.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tempi.agent.events import ToolOutput
from tests.docker_support import (  # noqa: F401 (fixtures)
    Sandbox,
    docker_client,
    open_host_dir,
    sandbox_image,
    shared_sandbox,
)


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


@dataclass
class Workspace:
    """One test's directory: `host` on this machine is `path` inside the container."""

    host: Path
    path: str
    sandbox: Sandbox
    spill: Path

    def ctx(self, **kwargs: object) -> ToolContext:
        return ToolContext(
            cwd=self.path,
            backend=self.sandbox.backend,
            spill_dir=str(self.spill),
            **kwargs,  # type: ignore[arg-type]
        )

    async def run(self, tool: str, **args: object) -> ToolOutcome:
        return await execute_tool(tool, args, self.ctx())


@pytest.fixture
def ws(shared_sandbox: Sandbox, tmp_path: Path) -> Workspace:  # noqa: F811
    name = f"t-{uuid.uuid4().hex[:10]}"
    assert shared_sandbox.host_workspace is not None
    host = open_host_dir(shared_sandbox.host_workspace / name)
    return Workspace(host, f"/workspace/{name}", shared_sandbox, tmp_path / "spill")


async def test_read_pages_with_offset_and_cuts_at_the_byte_limit(ws: Workspace):
    (ws.host / "a.txt").write_text("".join(f"{n}\n" for n in range(1, 11)))
    page = await ws.run("read", path="a.txt", offset=3, limit=2)
    assert _text(page) == "3\n4\n\n[7 more lines in the file. Continue with offset=5.]"
    past = await ws.run("read", path="a.txt", offset=12)
    assert past.is_error and "11 lines" in _text(past)

    (ws.host / "wide.txt").write_text("".join(f"{n:04d}{'-' * 95}\n" for n in range(1, 1001)))
    wide = await ws.run("read", path=f"{ws.path}/wide.txt", offset=11)
    shown = wide.details["truncation"]["outputLines"]
    assert shown == 51200 // 100
    assert _text(wide).endswith(
        f"Lines 11-{10 + shown} of 1001 shown (50.0KB limit). Continue with offset={11 + shown}.]"
    )


async def test_read_streams_a_large_file_and_reports_missing_ones(ws: Workspace):
    with (ws.host / "big.log").open("w") as handle:
        for n in range(1, 300_001):
            handle.write(f"entry {n}\n")
    outcome = await ws.run("read", path="big.log", offset=250_000, limit=2)
    assert _text(outcome) == (
        "entry 250000\nentry 250001\n\n[50000 more lines in the file. Continue with offset=250002.]"
    )
    missing = await ws.run("read", path="nope.txt")
    assert missing.is_error and _text(missing) == "File not found: nope.txt"
    directory = await ws.run("read", path=".")
    assert directory.is_error and "ls" in _text(directory)


async def test_write_creates_directories_keeps_modes_and_symlinks(ws: Workspace):
    written = await ws.run("write", path="deep/er/new.txt", content="hello\n")
    assert not written.is_error, _text(written)
    assert (ws.host / "deep/er/new.txt").read_text() == "hello\n"
    # Written as the sandbox user, so its commands can change the file afterwards.
    appended = await ws.run("bash", command="echo more >> deep/er/new.txt && cat deep/er/new.txt")
    assert _text(appended) == "hello\nmore\n"

    script = ws.host / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o755)
    (ws.host / "link.sh").symlink_to("run.sh")
    assert not (await ws.run("write", path="link.sh", content="#!/bin/sh\necho new\n")).is_error
    assert (ws.host / "link.sh").is_symlink()
    assert _text(await ws.run("bash", command="./run.sh")) == "new\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert not list(ws.host.glob(".*tempi*"))  # no temporary files left behind


async def test_writes_outside_the_writable_places_fail(ws: Workspace):
    outcome = await ws.run("write", path="/etc/tempi.conf", content="x")
    assert outcome.is_error and "Read-only file system" in _text(outcome)
    into_file = await ws.run("write", path="run/x.txt", content="x")
    assert not into_file.is_error
    under_file = await ws.run("write", path="run/x.txt/y", content="x")
    assert under_file.is_error and "not a directory" in _text(under_file)
    scratch = await ws.run("write", path="/tmp/scratch.txt", content="in tmp\n")
    assert not scratch.is_error
    assert _text(await ws.run("bash", command="cat /tmp/scratch.txt")) == "in tmp\n"


async def test_edit_keeps_crlf_and_bom(ws: Workspace):
    path = ws.host / "win.txt"
    path.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\n")
    outcome = await execute_tool(
        "edit",
        {"path": "win.txt", "edits": [{"oldText": "beta\ngamma", "newText": "BETA\nGAMMA\ndelta"}]},
        ws.ctx(tool_call_id="call-1", state_dir=str(ws.spill)),
    )
    assert not outcome.is_error, _text(outcome)
    assert path.read_bytes() == b"\xef\xbb\xbfalpha\r\nBETA\r\nGAMMA\r\ndelta\r\n"
    assert outcome.details == {
        "diff": " 1 alpha\n-2 beta\n-3 gamma\n+2 BETA\n+3 GAMMA\n+4 delta",
        "firstChangedLine": 2,
    }


async def test_bash_streams_merged_output_and_reports_exit_codes(ws: Workspace):
    updates: list[ToolOutput] = []
    outcome = await execute_tool(
        "bash",
        {"command": "pwd; echo one; echo err >&2; sleep 0.4; echo two"},
        ws.ctx(on_update=updates.append),
    )
    texts = ["".join(getattr(block, "text", "") for block in update.content) for update in updates]
    assert _text(outcome) == f"{ws.path}\none\nerr\ntwo\n"
    assert any(text.endswith("err\n") for text in texts)  # output arrived before the end
    failed = await ws.run("bash", command="echo partial; exit 7")
    assert failed.is_error and _text(failed) == "partial\n\n\nCommand exited with code 7"


async def _alive_in_sandbox(ws: Workspace, pid: str) -> bool:
    probe = await ws.sandbox.backend.run(["sh", "-c", f"grep -q '^State:.*[RSD]' /proc/{pid}/status"])
    return probe.exit_code == 0


async def test_bash_timeout_kills_the_whole_process_group(ws: Workspace):
    outcome = await ws.run("bash", command="sleep 30 & echo $! > child.pid; echo started; wait", timeout=1)
    assert outcome.is_error
    assert _text(outcome) == "started\n\n\nCommand timed out after 1 seconds"
    assert not await _alive_in_sandbox(ws, (ws.host / "child.pid").read_text().strip())


async def test_bash_abort_and_cancel_kill_the_command(ws: Workspace):
    abort = asyncio.Event()

    def on_update(partial: ToolOutput) -> None:
        if any("started" in getattr(block, "text", "") for block in partial.content):
            abort.set()

    command = "sleep 30 & echo $! > {name}; echo started; wait"
    aborted = await execute_tool(
        "bash", {"command": command.format(name="a.pid")}, ws.ctx(abort=abort, on_update=on_update)
    )
    assert _text(aborted) == "started\n\n\nCommand aborted"
    assert not await _alive_in_sandbox(ws, (ws.host / "a.pid").read_text().strip())

    call = asyncio.create_task(ws.run("bash", command=command.format(name="c.pid")))
    for _ in range(100):
        if (ws.host / "c.pid").exists():
            break
        await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not await _alive_in_sandbox(ws, (ws.host / "c.pid").read_text().strip())


async def test_a_background_job_holding_the_output_does_not_hang_bash(ws: Workspace):
    outcome = await asyncio.wait_for(ws.run("bash", command="sleep 30 & echo $! > bg.pid; echo done"), 10)
    assert _text(outcome) == "done\n"
    await ws.sandbox.backend.run(["kill", (ws.host / "bg.pid").read_text().strip()])


@pytest.fixture
def project(ws: Workspace) -> Workspace:
    """Not a git repository of its own: .gitignore must be honoured anyway."""
    files = {
        ".gitignore": "build/\n*.log\n",
        ".env": "TOKEN=needle\n",
        "README.md": "# Project\nneedle in readme\n",
        "Makefile": "all:\n",
        "build/out.txt": "needle in build output\n",
        "debug.log": "needle in a log\n",
        "src/app.py": "import os\n\ndef main():\n    return 'needle'\n",
        "src/nested/deep.py": "needle = 1\n",
        "zeta/empty/.keep": "",
    }
    for name, content in files.items():
        path = ws.host / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return ws


async def test_grep_honours_gitignore_and_includes_hidden_files(project: Workspace):
    outcome = await project.run("grep", pattern="needle")
    assert [line.split(":")[0] for line in _text(outcome).splitlines()] == [
        ".env",
        "README.md",
        "src/app.py",
        "src/nested/deep.py",
    ]
    context = await project.run("grep", pattern="MAIN", path="src/app.py", ignoreCase=True, context=1)
    assert _text(context) == "app.py-2- \napp.py:3: def main():\napp.py-4-     return 'needle'"
    missing = await project.run("grep", pattern="x", path="nowhere")
    assert missing.is_error and "Path not found" in _text(missing)


async def test_find_and_ls(project: Workspace):
    found = await project.run("find", pattern="**/*.py")
    assert _text(found).splitlines() == ["src/app.py", "src/nested/deep.py"]
    directories = await project.run("find", pattern="*", path="src")
    assert _text(directories).splitlines() == ["app.py", "nested/", "nested/deep.py"]
    listing = await project.run("ls")
    assert _text(listing).splitlines() == [
        ".env",
        ".gitignore",
        "build/",
        "debug.log",
        "Makefile",
        "README.md",
        "src/",
        "zeta/",
    ]
    not_dir = await project.run("ls", path="Makefile")
    assert not_dir.is_error and "Not a directory" in _text(not_dir)
    empty = await project.run("ls", path="zeta/empty")
    assert _text(empty) == ".keep"
