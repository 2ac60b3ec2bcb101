"""pi and tempi take turns on one session file and no turn is lost: whichever program
continues the file starts from the last turn written, whoever wrote it.

Real pi 0.73.1 (PI_BIN or PATH; its tests skip without it unless TEMPI_REQUIRE_PI=1) and
real `tempi` processes, all talking to the scripted model server.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.pi_bin import pi_bin

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow


class Rig:
    """One working folder, tempi's home and pi's agent folder, each with its scenario."""

    def __init__(
        self, tmp_path: Path, temporal_address: str | None, server: ScriptedLLMServer, name: str
    ) -> None:
        self.server = server
        self.tempi_scenario, self.pi_scenario = f"{name}-tempi", f"{name}-pi"
        turns = [{"text": f"tempi answer {n}"} for n in range(1, 4)]
        server.add_scenario(self.tempi_scenario, {"select": "sequential", "turns": turns})
        turns = [{"text": f"pi answer {n}"} for n in range(1, 4)]
        server.add_scenario(self.pi_scenario, {"select": "sequential", "turns": turns})
        home, self.pi_dir, self.work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
        self.sessions = tmp_path / "sessions"
        self.work.mkdir()
        write_models_json(home, server, self.tempi_scenario)
        write_models_json(self.pi_dir, server, self.pi_scenario)
        self.env = tempi_env(home, temporal_address)

    def tempi(self, *args: str) -> str:
        done = run_tempi(["--model", "mock/mock-model", *args], cwd=self.work, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def pi_run(self, *args: str) -> str:
        env = {**self.env, "PI_CODING_AGENT_DIR": str(self.pi_dir), "PI_OFFLINE": "1"}
        done = subprocess.run(
            [pi_bin(), "--provider", "mock", "--model", "mock-model", *args],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def model_saw(self, scenario: str) -> str:
        """What the model was sent in its latest request of `scenario`."""
        return json.dumps(self.server.requests_for(scenario)[-1].body["messages"])


def entries(session_file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in session_file.read_text().splitlines()[1:]]


def active_branch_texts(session_file: Path) -> list[str]:
    """The text of every message from the root to the file's last entry (where pi and
    tempi continue a file), oldest first."""
    all_entries = entries(session_file)
    by_id = {e["id"]: e for e in all_entries}
    branch: list[str] = []
    entry: dict[str, Any] | None = all_entries[-1]
    while entry is not None:
        if entry["type"] == "message":
            content = entry["message"]["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            branch.append("".join(b.get("text", "") for b in blocks if b["type"] == "text"))
        entry = by_id.get(entry["parentId"])
    return branch[::-1]


def user_entry(session_file: Path, text: str) -> dict[str, Any]:
    (found,) = [
        e for e in entries(session_file) if e["type"] == "message" and text in json.dumps(e["message"])
    ]
    return found


def test_tempi_continues_from_the_turn_pi_appended(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    rig = Rig(tmp_path, temporal_address, scripted_server, "mixed-tp")
    assert rig.tempi("--session-dir", str(rig.sessions), "-p", "First, from tempi") == "tempi answer 1"
    (session_file,) = rig.sessions.glob("*.jsonl")

    assert rig.pi_run("--session", str(session_file), "-p", "Second, from pi") == "pi answer 1"
    pi_leaf = entries(session_file)[-1]
    assert pi_leaf["message"]["role"] == "assistant"

    # tempi's workflow for this file is still running (idle): its next turn must start
    # where pi left the file, not where tempi last wrote.
    assert rig.tempi("--session", str(session_file), "-p", "Third, from tempi") == "tempi answer 2"
    assert user_entry(session_file, "Third, from tempi")["parentId"] == pi_leaf["id"]
    seen = rig.model_saw(rig.tempi_scenario)
    assert "Second, from pi" in seen and "pi answer 1" in seen
    assert active_branch_texts(session_file) == [
        "First, from tempi",
        "tempi answer 1",
        "Second, from pi",
        "pi answer 1",
        "Third, from tempi",
        "tempi answer 2",
    ]


def test_joining_tempis_running_session_shows_the_turn_pi_appended(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    rig = Rig(tmp_path, temporal_address, scripted_server, "mixed-join")
    assert rig.tempi("--session-dir", str(rig.sessions), "-p", "First, from tempi") == "tempi answer 1"
    (session_file,) = rig.sessions.glob("*.jsonl")
    assert rig.pi_run("--session", str(session_file), "-p", "Second, from pi") == "pi answer 1"

    # Before any prompt: what a front end shows is already the conversation pi left.
    done = run_tempi(
        ["--mode", "rpc", "--session", str(session_file)],
        cwd=rig.work,
        env=rig.env,
        input=json.dumps({"id": "m", "type": "get_messages"}) + "\n",
    )
    assert done.returncode == 0, done.stderr
    (reply,) = [r for r in map(json.loads, done.stdout.splitlines()) if r.get("id") == "m"]
    texts = json.dumps(reply["data"]["messages"])
    assert "Second, from pi" in texts and "pi answer 1" in texts


def test_pis_turn_is_kept_across_a_restart_of_tempis_server(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    rig = Rig(tmp_path, None, scripted_server, "mixed-restart")  # tempi's own background server
    try:
        assert rig.tempi("--session-dir", str(rig.sessions), "-p", "First, from tempi") == "tempi answer 1"
        (session_file,) = rig.sessions.glob("*.jsonl")
        assert rig.pi_run("--session", str(session_file), "-p", "Second, from pi") == "pi answer 1"
        pi_leaf = entries(session_file)[-1]
        stopped = run_tempi(["server", "stop"], cwd=rig.work, env=rig.env)
        assert "stopped" in stopped.stdout, stopped.stderr

        # The session's workflow outlives the server; the new server's worker continues it.
        assert rig.tempi("--session", str(session_file), "-p", "Third, from tempi") == "tempi answer 2"
        assert user_entry(session_file, "Third, from tempi")["parentId"] == pi_leaf["id"]
        assert "pi answer 1" in rig.model_saw(rig.tempi_scenario)
    finally:
        run_tempi(["server", "stop"], cwd=rig.work, env=rig.env)


def test_pi_and_tempi_take_turns_on_one_file(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    rig = Rig(tmp_path, temporal_address, scripted_server, "mixed-ptpt")
    assert rig.pi_run("--session-dir", str(rig.sessions), "-p", "One, from pi") == "pi answer 1"
    (session_file,) = rig.sessions.glob("*.jsonl")

    assert rig.tempi("--session", str(session_file), "-p", "Two, from tempi") == "tempi answer 1"
    assert rig.pi_run("--session", str(session_file), "-p", "Three, from pi") == "pi answer 2"
    seen = rig.model_saw(rig.pi_scenario)
    assert "Two, from tempi" in seen and "tempi answer 1" in seen

    assert rig.tempi("--session", str(session_file), "-p", "Four, from tempi") == "tempi answer 2"
    seen = rig.model_saw(rig.tempi_scenario)
    assert "One, from pi" in seen and "Three, from pi" in seen and "pi answer 2" in seen
    assert active_branch_texts(session_file) == [
        "One, from pi",
        "pi answer 1",
        "Two, from tempi",
        "tempi answer 1",
        "Three, from pi",
        "pi answer 2",
        "Four, from tempi",
        "tempi answer 2",
    ]


# Run by the session's own bash tool, in the middle of a run: another program (as pi
# would) continues the session file from its last entry.
APPEND_FOREIGN_TURN = """python3 - <<'PY'
import glob, json
(path,) = glob.glob("SESSIONS/*.jsonl")
last = json.loads(open(path).read().splitlines()[-1])
line = {"type": "message", "id": "f0f0f0f0", "parentId": last["id"], "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "Typed in pi meanwhile"}], "timestamp": 0}}
open(path, "a").write(json.dumps(line) + "\\n")
PY"""


def test_a_run_stops_when_the_file_changes_under_it(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    rig = Rig(tmp_path, temporal_address, scripted_server, "mixed-midrun")
    command = APPEND_FOREIGN_TURN.replace("SESSIONS", str(rig.sessions))
    scenario = "mixed-midrun-tools"
    scripted_server.add_scenario(
        scenario,
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
                {"text": "went on as if nothing happened"},
                {"text": "continued after pi"},
            ],
        },
    )
    write_models_json(tmp_path / "home", scripted_server, scenario)
    done = run_tempi(
        ["--model", "mock/mock-model", "--session-dir", str(rig.sessions), "-p", "Run the command"],
        cwd=rig.work,
        env=rig.env,
    )
    # The model is not asked again on a view of the file that is no longer the latest,
    # and the user is told what happened and what to do.
    assert done.returncode != 0
    assert "changed by another program" in done.stderr and "Send your prompt again" in done.stderr
    assert len(scripted_server.requests_for(scenario)) == 1

    (session_file,) = rig.sessions.glob("*.jsonl")
    assert rig.tempi("--session", str(session_file), "-p", "Carry on") == "went on as if nothing happened"
    assert user_entry(session_file, "Carry on")["parentId"] == "f0f0f0f0"
    assert "Typed in pi meanwhile" in rig.model_saw(scenario)
