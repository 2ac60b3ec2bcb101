"""Transcripts, tool output and keys are the user's alone: with the common umask 022, what
tempi writes under its home and beside a session file is out of other users' reach."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _run_with_umask_022(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tempi", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        input="",
        preexec_fn=lambda: os.umask(0o022),
    )


def _reachable_by_others(path: Path, top: Path) -> bool:
    """Whether another user could read `path`: every folder on the way lets them through
    and the file itself lets them read."""
    if not _mode(path) & 0o044:
        return False
    folder = path.parent
    while True:
        if not _mode(folder) & 0o011:
            return False
        if folder == top or folder == folder.parent:
            return True
        folder = folder.parent


def test_home_and_session_files_are_private_whatever_the_umask(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    old_umask = os.umask(0o022)
    try:
        scripted_server.add_scenario(
            "private-files",
            [
                # Output big enough to spill to a file beside the session.
                {"tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 50000"}}]},
                {"text": "done"},
            ],
        )
        home = tmp_path / "home"
        home.mkdir(mode=0o755)  # as an older tempi, or `mkdir ~/.tempi`, left it
        write_models_json(home, scripted_server, "private-files")
        (home / "models.json").chmod(0o644)
        work = tmp_path / "project"
        work.mkdir()
        proc = _run_with_umask_022(
            ["--model", "mock/mock-model", "--tools", "bash", "-p", "count"],
            cwd=work,
            env=tempi_env(home, temporal_address),
        )
    finally:
        os.umask(old_umask)
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout
    assert f"made {home} private" in proc.stderr

    assert _mode(home) == 0o700
    sessions = list((home / "sessions").glob("*/*.jsonl"))
    assert len(sessions) == 1
    assert _mode(sessions[0]) == 0o600
    sidecar_root = sessions[0].parent / ".tempi"
    assert _mode(sidecar_root) == 0o700
    spills = list(sidecar_root.glob("*/output/*"))
    assert spills, "the bash output should have spilled to a file"
    assert all(_mode(spill) == 0o600 for spill in spills)
    everything = [p for p in home.rglob("*") if p.is_file()]
    exposed = [p for p in everything if _reachable_by_others(p, tmp_path)]
    assert exposed == []


def test_a_new_home_is_created_private(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    code = "from tempi.config.paths import tempi_home; print(tempi_home())"
    env = {**os.environ, "TEMPI_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert proc.returncode == 0, proc.stderr
    assert _mode(home) == 0o700
    assert proc.stderr == ""  # nothing to say about a home it made itself


def test_a_shared_sticky_home_is_not_taken_from_others(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    code = "from tempi.config.paths import tempi_home; tempi_home()"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "TEMPI_HOME": str(shared)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert _mode(shared) == 0o1777
    assert "is open to other users" in proc.stderr and "chmod 700" in proc.stderr


def test_live_and_session_files_are_private_outside_the_home(tmp_path: Path) -> None:
    """A session kept elsewhere (--session-dir): file 0600, side files in a 0700 folder."""
    from tempi.agent.session_entries import SessionHeader
    from tempi.store.live_channel import LiveWriter
    from tempi.store.session_store import SessionStore
    from tempi.store.sidecar import live_path, pending_path

    old_umask = os.umask(0o022)
    try:
        store = SessionStore(tmp_path / "sessions")
        path = tmp_path / "elsewhere" / "s.jsonl"
        store.create(path, SessionHeader(id="s1", timestamp="2026-11-21T00:00:00.000Z", cwd="/w"))
        live = LiveWriter(live_path(path, "s1", "k"), 1)
        live.write({"delta": "secret"})
        live.close()
        pending = pending_path(path, "s1", "e1")
        pending.parent.mkdir(parents=True, exist_ok=True)
        pending.write_text("{}")  # a writer that sets no mode of its own
    finally:
        os.umask(old_umask)
    assert _mode(path.parent) == 0o700
    assert _mode(path) == 0o600
    assert _mode(live_path(path, "s1", "k")) == 0o600
    assert _mode(path.parent / ".tempi") == 0o700
    assert not _reachable_by_others(pending, tmp_path)


def _home_of_another_user(tmp_path: Path) -> Path:
    """A 0700 directory that uid 65534 (nobody) owns; skips unless this test may chown."""
    home = tmp_path / "theirs"
    home.mkdir(mode=0o700)
    try:
        os.chown(home, 65534, 65534)
    except PermissionError:
        pytest.skip("needs root to give a directory to another user")
    if os.getuid() == 65534:
        pytest.skip("runs as uid 65534 itself")
    return home


def test_a_home_another_user_owns_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: a TEMPI_HOME that another user owns (even 0700) lets that user read the
    keys, transcripts and Temporal database tempi would keep there: an error, not a warning."""
    from tempi.config.paths import ForeignHomeError, tempi_home

    home = tmp_path / "theirs"
    home.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(home, 65534, 65534)
    else:  # pretend to be another uid
        real = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: real + 1)
    owner = home.stat().st_uid
    monkeypatch.setenv("TEMPI_HOME", str(home))
    with pytest.raises(ForeignHomeError) as raised:
        tempi_home()
    message = str(raised.value)
    assert str(home) in message and f"uid {owner}" in message
    assert "TEMPI_HOME" in message
    with pytest.raises(ForeignHomeError):
        tempi_home()  # every time, not only the first


def test_the_cli_refuses_a_home_another_user_owns_and_writes_nothing_there(tmp_path: Path) -> None:
    home = _home_of_another_user(tmp_path)
    env = tempi_env(home, None)
    for args in (["-p", "hello"], ["--list-models"]):
        proc = run_tempi(args, cwd=tmp_path, env=env, timeout=60)
        assert proc.returncode != 0, proc.stdout
        assert f"tempi: {home} belongs to another user" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert list(home.iterdir()) == []
