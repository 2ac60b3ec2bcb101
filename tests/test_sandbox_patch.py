"""workspace_patch: what changed in a sandbox's workspace, as a patch that applies to the
workspace as it was when the sandbox started."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tempi.activities.sandbox import destroy_sandbox, workspace_patch
from tempi.activities.tools import ToolContext, execute_tool
from tests.docker_support import (  # noqa: F401 (fixtures)
    SandboxFactory,
    docker_client,
    sandbox_image,
    sandboxes,
)


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


async def test_the_patch_rebuilds_the_changed_workspace_from_the_original(
    sandboxes: SandboxFactory,  # noqa: F811
    tmp_path: Path,
):
    original = tmp_path / "original"
    (original / "src").mkdir(parents=True)
    (original / "src/app.py").write_text("def main():\n    return 1\n")
    (original / "old.txt").write_text("to be deleted\n")
    (original / ".gitignore").write_text("*.log\n")
    workspace = tmp_path / "workspace"
    shutil.copytree(original, workspace)
    for path in [workspace, *workspace.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)

    sandbox = await sandboxes.create(workspace)
    assert await workspace_patch(sandbox.backend) == ""  # nothing changed yet
    ctx = ToolContext(cwd="/workspace", backend=sandbox.backend)
    edit = {"path": "src/app.py", "edits": [{"oldText": "return 1", "newText": "return 2"}]}
    assert not (await execute_tool("edit", edit, ctx)).is_error
    assert not (await execute_tool("write", {"path": "docs/new.md", "content": "# New\n"}, ctx)).is_error
    # data.bin is binary; latin1.txt is text that is not UTF-8.
    commands = (
        "rm old.txt && printf '\\000\\001\\377' > data.bin && printf 'caf\\351\\n' > latin1.txt"
        " && echo noise > run.log"
    )
    assert not (await execute_tool("bash", {"command": commands}, ctx)).is_error

    patch = await workspace_patch(sandbox.backend)
    assert "run.log" not in patch  # ignored files are not changes
    _git(original, "init", "-q")
    _git(original, "apply", "--binary", "-", stdin=patch)
    expected = {name: data for name, data in _tree(workspace).items() if name != "run.log"}
    assert _tree(original) == expected
    assert expected["data.bin"] == b"\x00\x01\xff" and expected["latin1.txt"] == b"caf\xe9\n"


async def test_an_existing_repository_keeps_its_index_and_uncommitted_work_is_the_base(
    sandboxes: SandboxFactory,  # noqa: F811
    tmp_path: Path,
):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("committed\n")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "first")
    (repo / "a.txt").write_text("staged before the sandbox\n")
    _git(repo, "add", "a.txt")
    (repo / "draft.txt").write_text("untracked before the sandbox\n")
    for path in [repo, *repo.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    head_before = _git(repo, "rev-parse", "HEAD")

    sandbox = await sandboxes.create(repo)
    await sandbox.backend.write_bytes("/workspace/draft.txt", b"changed in the sandbox\n")
    patch = await workspace_patch(sandbox.backend)
    changed = [line for line in patch.splitlines() if line.startswith(("+++", "---"))]
    assert changed == ["--- a/draft.txt", "+++ b/draft.txt"]
    assert "+changed in the sandbox" in patch and "-untracked before the sandbox" in patch
    # The user's branch and staged change are as they were.
    assert _git(repo, "rev-parse", "HEAD") == head_before
    assert _git(repo, "diff", "--cached", "--name-only") == "a.txt\n"


async def test_a_volume_workspace_starts_empty_and_its_patch_holds_everything(
    sandboxes: SandboxFactory,  # noqa: F811
    docker_client: Any,  # noqa: F811
    tmp_path: Path,
):
    volume = f"tempi-test-{uuid.uuid4().hex[:12]}"
    try:
        sandbox = await sandboxes.create(volume)
        ctx = ToolContext(cwd="/workspace", backend=sandbox.backend)
        write = await execute_tool("write", {"path": "made/here.txt", "content": "from the sandbox\n"}, ctx)
        assert not write.is_error
        target = tmp_path / "target"
        target.mkdir()
        _git(target, "init", "-q")
        _git(target, "apply", "-", stdin=await workspace_patch(sandbox.backend))
        assert (target / "made/here.txt").read_text() == "from the sandbox\n"
    finally:
        for session_id in sandboxes.session_ids:  # the volume is in use until then
            await destroy_sandbox(session_id, client=docker_client)
        docker_client.volumes.get(volume).remove()
