"""pi's sessions are tempi's too (issue 36, item 2): `tempi sessions list`, `sessions path ID`,
`--continue` and `--session ID` look in pi's session directory for the working directory
(`$PI_CODING_AGENT_DIR/sessions/--<cwd>--/`) as well as tempi's, newest first, whichever
program wrote the file. (tests/test_pi_interop.py does the same with a session pi writes
while the test runs.)"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from tempi.store.catalog import session_dir_for, session_file_name
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.test_interactive_terminal import Terminal

FIXTURES = Path(__file__).parent / "fixtures" / "pi-0.73.1" / "sessions"


def place_session(
    root: Path, fixture: str, cwd: Path, *, mtime: float, session_id: str | None = None
) -> Path:
    """A recorded pi session file, moved to `cwd` and put where pi (or tempi) keeps it under
    `root`; its file time is `mtime`. It gets an id of its own (`session_id`, else a new
    one): sessions go on running on the test's Temporal server, one workflow per id."""
    lines = (FIXTURES / fixture).read_text().splitlines()
    header = {**json.loads(lines[0]), "cwd": str(cwd), "id": session_id or str(uuid.uuid4())}
    path = session_dir_for(root, cwd) / session_file_name(header["id"], header["timestamp"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    os.utime(path, (mtime, mtime))
    return path


def _listed(work: Path, env: dict[str, str]) -> list[dict[str, object]]:
    done = run_tempi(["sessions", "list", "--here", "--no-status", "--json"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_sessions_list_and_path_show_pis_sessions_beside_tempis(tmp_path: Path) -> None:
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    env = tempi_env(home, None, PI_CODING_AGENT_DIR=str(pi_dir))
    pis = place_session(pi_dir / "sessions", "basic-openai.jsonl", work, mtime=1_000)
    tempis = place_session(
        home / "sessions", "tools.jsonl", work, mtime=2_000, session_id="0199bbbb-0000-7000-8000-00000000000b"
    )
    pi_id = json.loads(pis.read_text().splitlines()[0])["id"]

    listed = _listed(work, env)
    assert [row["path"] for row in listed] == [str(tempis), str(pis)]  # newest first
    assert listed[1]["id"] == pi_id and listed[1]["messageCount"] > 0

    found = run_tempi(["sessions", "path", pi_id[:8]], cwd=work, env=env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(pis)


def test_continue_and_session_id_pick_up_a_pi_session(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "pi-session-visible", {"select": "sequential", "turns": [{"text": "one"}, {"text": "two"}]}
    )
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "pi-session-visible")
    env = tempi_env(home, temporal_address, PI_CODING_AGENT_DIR=str(pi_dir))
    older = place_session(
        home / "sessions", "tools.jsonl", work, mtime=1_000, session_id="0199cccc-0000-7000-8000-00000000000c"
    )
    pis = place_session(pi_dir / "sessions", "basic-openai.jsonl", work, mtime=2_000)
    pi_id = json.loads(pis.read_text().splitlines()[0])["id"]
    pi_lines = len(pis.read_text().splitlines())

    done = run_tempi(["--model", "mock/mock-model", "--continue", "-p", "and now?"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "one"
    # The newest session here was pi's: the model saw its conversation, and its file grew.
    first = scripted_server.requests_for("pi-session-visible")[0]
    assert "Create hello.py" in json.dumps(first.body["messages"])
    assert len(pis.read_text().splitlines()) > pi_lines
    assert not (home / "sessions" / pis.parent.name / pis.name).exists()

    os.utime(pis, (1_000, 1_000))
    os.utime(older, (2_000, 2_000))
    done = run_tempi(["--model", "mock/mock-model", "--session", pi_id[:8], "-p", "again"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "two"
    assert "and now?" in json.dumps(scripted_server.requests_for("pi-session-visible")[1].body["messages"])


@pytest.mark.slow  # a real terminal; the listing itself is covered by the sessions list test
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_resume_offers_pis_sessions_beside_tempis(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "pi-session-resume", {"select": "sequential", "turns": [{"text": "resumed."}]}
    )
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "pi-session-resume")
    env = tempi_env(home, temporal_address, PI_CODING_AGENT_DIR=str(pi_dir))
    place_session(
        home / "sessions", "tools.jsonl", work, mtime=1_000, session_id="0199dddd-0000-7000-8000-00000000000d"
    )
    pis = place_session(pi_dir / "sessions", "basic-openai.jsonl", work, mtime=2_000)
    pi_id = json.loads(pis.read_text().splitlines()[0])["id"]

    terminal = Terminal(["--model", "mock/mock-model", "--resume", "-p", "go on"], cwd=work, env=env)
    try:
        screen = terminal.wait_for("Session to continue [1-2")
        (row,) = [line for line in screen.splitlines() if pi_id[:8] in line]
        assert any("0199dddd" in line for line in screen.splitlines())
        terminal.type(row.split(".")[0].strip())
        terminal.keys("Enter")
        terminal.wait_for("[tempi exited 0]")
    finally:
        terminal.close()
    (request,) = scripted_server.requests_for("pi-session-resume")
    assert "Create hello.py" in json.dumps(request.body["messages"])
