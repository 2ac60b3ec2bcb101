"""`tempi --mode rpc` against the real rig (Temporal dev server, worker, scripted LLM),
compared with what pi 0.73.1 answered to the same commands."""

from __future__ import annotations

import base64
import html
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env, write_models_json
from tests.fixture_paths import PI_FIXTURES

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow


class RpcProcess:
    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tempi", "--mode", "rpc", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        # Everything read so far, in order: each is a parsed line (or the raw bytes if not JSON).
        self.seen: list[Any] = []
        self._cursor = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        buffer = b""
        while True:
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self.lines.put(None)
                return
            *complete, buffer = (buffer + chunk).split(b"\n")
            for line in complete:
                self.lines.put(line)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, command: dict[str, Any]) -> None:
        self.send_raw(json.dumps(command, ensure_ascii=False).encode("utf-8") + b"\n")

    def _next(self, deadline: float) -> Any:
        while self._cursor >= len(self.seen):
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError(f"no more output; stderr so far:\n{self.stderr_text()}")
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"tempi closed stdout; stderr:\n{self.stderr_text()}")
            try:
                self.seen.append(json.loads(line))
            except json.JSONDecodeError:
                self.seen.append(line)
        item = self.seen[self._cursor]
        self._cursor += 1
        return item

    def wait_for(self, match: Any, timeout: float = 30) -> dict[str, Any]:
        """The next output line for which `match(line)` holds (earlier lines stay in `seen`)."""
        deadline = time.monotonic() + timeout
        while True:
            item = self._next(deadline)
            if isinstance(item, dict) and match(item):
                return item

    def response(self, command: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("type") == "response" and m.get("command") == command, timeout)

    def event(self, kind: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("type") == kind, timeout)

    def call(self, command: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        self.send(command)
        return self.response(command["type"], timeout)

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")

    def close(self, timeout: float = 15) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


# --- the rig ------------------------------------------------------------------------------


def _pi_transcript(name: str) -> list[dict[str, Any]]:
    """pi's stdout lines of a recorded RPC session, parsed."""
    lines = (PI_FIXTURES / "rpc" / f"{name}.transcript.jsonl").read_text().split("\n")
    out = []
    for raw in lines:
        if raw.strip():
            record = json.loads(raw)
            if record["dir"] == "out" and isinstance(record["line"], dict):
                out.append(record["line"])
    return out


@pytest.fixture
def rpc_factory(tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer) -> Iterator[Any]:
    started: list[RpcProcess] = []

    def start(scenario_name: str, turns: list[dict[str, Any]], *args: str) -> RpcProcess:
        scripted_server.add_scenario(scenario_name, turns)
        home = tmp_path / "home"
        work = tmp_path / "project"
        work.mkdir(exist_ok=True)
        write_models_json(home, scripted_server, scenario_name)
        rpc = RpcProcess(
            ["--model", "mock/mock-model", *args], cwd=work, env=tempi_env(home, temporal_address)
        )
        started.append(rpc)
        return rpc

    yield start
    for rpc in started:
        if rpc.proc.poll() is None:
            rpc.proc.kill()
            rpc.proc.wait()


def _replay(rpc: RpcProcess, steps: list[dict[str, Any]]) -> None:
    """Run pi's recorded steps: send commands, wait for responses and events as pi's driver did."""
    for step in steps:
        if "send" in step:
            rpc.send(step["send"])
        elif "wait_response" in step:
            rpc.response(step["wait_response"], timeout=step.get("timeout", 30))
        elif "wait" in step:
            rpc.event(step["wait"], timeout=step.get("timeout", 30))
        elif "sleep" in step:
            time.sleep(step["sleep"])


def _responses(lines: list[Any]) -> dict[str, dict[str, Any]]:
    """Responses by command id (by command name when a response carries no id)."""
    return {
        str(m.get("id") or m["command"]): m
        for m in lines
        if isinstance(m, dict) and m.get("type") == "response"
    }


def _structure(lines: list[Any]) -> list[str]:
    """The run's shape: lifecycle and message events with roles, and queue sizes. Streaming
    updates and tool execution events are left out: their timing is the machine's."""
    out = []
    for m in lines:
        if not isinstance(m, dict) or m.get("type") == "response":
            continue
        kind = m["type"]
        if kind.startswith("tool_execution") or kind == "message_update":
            continue
        if kind in ("message_start", "message_end"):
            kind += ":" + m["message"]["role"]
        if kind == "queue_update":
            kind += f":{len(m['steering'])}/{len(m['followUp'])}"
        out.append(kind)
    return out


def _first_run(lines: list[Any], prompt_id: str) -> list[Any]:
    start = next(i for i, m in enumerate(lines) if isinstance(m, dict) and m.get("id") == prompt_id)
    end = next(
        i for i, m in enumerate(lines) if i > start and isinstance(m, dict) and m.get("type") == "agent_end"
    )
    return lines[start : end + 1]


# --- tests -------------------------------------------------------------------------------


def test_replaying_pis_rpc_session_gives_pis_answers(rpc_factory: Any) -> None:
    turns = json.loads((PI_FIXTURES / "scenarios" / "rpc1.json").read_text())
    steps = json.loads((PI_FIXTURES / "rpc" / "steer-followup-compact.steps.json").read_text())
    rpc = rpc_factory("rpc1-replay", turns, "--tools", "read,bash,edit,write")
    _replay(rpc, steps)
    assert rpc.close() == 0

    ours, theirs = _responses(rpc.seen), _responses(_pi_transcript("steer-followup-compact"))
    # pi drops the id of an unknown command; tempi echoes it, so clients can match it up.
    theirs["r16"] = theirs.pop("bogus_command")
    assert set(ours) == set(theirs)
    for key, pi_response in theirs.items():
        mine = ours[key]
        assert mine["command"] == pi_response["command"], key
        assert mine["success"] == pi_response["success"], (key, mine)
        if "data" in pi_response:
            assert isinstance(mine["data"], dict)
            assert set(mine["data"]) == set(pi_response["data"]), key
    assert ours["r16"]["error"] == "Unknown command: bogus_command"
    assert ours["r17"]["error"] == "Model not found: nope/nope"
    # Steering lands before the follow-up, each as its own turn, as in pi.
    roles = [m["role"] for m in ours["r6"]["data"]["messages"]]
    assert roles == [m["role"] for m in theirs["r6"]["data"]["messages"]]
    assert [m["text"] for m in ours["r12"]["data"]["messages"]] == [
        m["text"] for m in theirs["r12"]["data"]["messages"]
    ]
    assert ours["r10"]["data"] == theirs["r10"]["data"]
    assert ours["r9"]["data"]["output"] == "from-user-bash\n"
    stats = ours["r7"]["data"]
    assert {
        k: stats[k]
        for k in ("userMessages", "assistantMessages", "toolCalls", "toolResults", "totalMessages")
    } == {
        k: theirs["r7"]["data"][k]
        for k in ("userMessages", "assistantMessages", "toolCalls", "toolResults", "totalMessages")
    }
    final_state = ours["r18"]["data"]
    assert final_state["sessionName"] == "rpc-capture"
    assert final_state["thinkingLevel"] == "off"  # the mock model cannot think, so "high" was clamped
    assert final_state["isStreaming"] is False
    # The name change is announced before its response.
    names = [
        i for i, m in enumerate(rpc.seen) if isinstance(m, dict) and m.get("type") == "session_info_changed"
    ]
    assert names and names[0] < rpc.seen.index(ours["r11"])
    # The run with steering and a follow-up has pi's shape.
    shape = _structure(_first_run(rpc.seen, "r3"))
    pis = _structure(_first_run(_pi_transcript("steer-followup-compact"), "r3"))
    assert shape == pis


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    return [
        "".join(b.get("text", "") for b in m["content"] if b.get("type") == "text")
        if isinstance(m.get("content"), list)
        else str(m.get("content"))
        for m in messages
    ]


def test_bad_lines_get_errors_and_the_session_goes_on(rpc_factory: Any) -> None:
    rpc = rpc_factory("rpc-robust", [{"text": "first\u2028answer"}, {"text": "second answer"}], "--no-tools")
    rpc.send_raw(b"this is not json\n")
    assert "Failed to parse command" in rpc.response("parse")["error"]
    rpc.send_raw(b"[1, 2]\r\n")
    assert "expected a JSON object" in rpc.response("parse")["error"]
    rpc.send_raw(b'{"id": "x", "type": "prompt", "message": "\xff\xfe"}\n')
    assert "not valid UTF-8" in rpc.response("parse")["error"]
    unknown = rpc.call({"id": "u1", "type": "frobnicate"})
    assert unknown == {
        "id": "u1",
        "type": "response",
        "command": "frobnicate",
        "success": False,
        "error": "Unknown command: frobnicate",
    }

    # U+2028 inside a string is content, not a line break, in both directions.
    prompt = "line one\u2028line two\u2029end"
    assert rpc.call({"id": "p1", "type": "prompt", "message": prompt})["success"] is True
    user_end = rpc.wait_for(lambda m: m.get("type") == "message_end" and m["message"]["role"] == "user")
    assert _texts([user_end["message"]]) == [prompt]
    rpc.event("agent_end")
    messages = rpc.call({"id": "m1", "type": "get_messages"})["data"]["messages"]
    assert _texts(messages) == [prompt, "first\u2028answer"]
    assert rpc.close() == 0


def test_deep_and_huge_lines_get_errors_without_stalling_other_commands(rpc_factory: Any) -> None:
    rpc = rpc_factory("rpc-hostile-lines", [{"text": "still here"}], "--no-tools")
    # 1 KB of "[" once made the decoder recurse until the process died.
    rpc.send_raw(b"[" * 1000 + b"\n")
    assert "nested deeper" in rpc.response("parse")["error"]
    deep_but_valid = b'{"id": "d1", "type": "get_state", "x": ' + b"[" * 200 + b"]" * 200 + b"}\n"
    rpc.send_raw(deep_but_valid)
    assert "nested deeper" in rpc.response("parse")["error"]
    assert rpc.call({"id": "s1", "type": "get_state"})["success"] is True

    # A 64 MB line, then a command: the command's answer must not wait for the whole
    # line to be buffered and re-split (that took 37 s).
    huge = b'{"id": "h1", "type": "prompt", "message": "' + b"x" * (64 * 1024 * 1024) + b'"}\n'
    started = time.monotonic()
    writer = threading.Thread(
        target=rpc.send_raw, args=(huge + b'{"id": "s2", "type": "get_state"}\n',), daemon=True
    )
    writer.start()
    assert "over 8 MB" in rpc.response("parse", timeout=60)["error"]
    state = rpc.wait_for(lambda m: m.get("id") == "s2", timeout=60)
    elapsed = time.monotonic() - started
    writer.join(10)
    assert state["success"] is True
    assert elapsed < 8, f"get_state after a 64 MB line took {elapsed:.1f} s"

    # The session itself goes on.
    assert rpc.call({"id": "p1", "type": "prompt", "message": "hi"})["success"] is True
    end = rpc.event("agent_end")
    assert "still here" in json.dumps(end)
    assert rpc.close() == 0


def test_sessions_can_be_forked_cloned_switched_and_exported(rpc_factory: Any, tmp_path: Path) -> None:
    rpc = rpc_factory("rpc-branches", [{"text": "answer one"}, {"text": "answer <two>"}], "--no-tools")
    for n, text in enumerate(["question one", "question <two>"]):
        rpc.call({"id": f"p{n}", "type": "prompt", "message": text})
        rpc.event("agent_end")
    original = rpc.call({"type": "get_state"})["data"]
    points = rpc.call({"type": "get_fork_messages"})["data"]["messages"]
    assert [p["text"] for p in points] == ["question one", "question <two>"]

    forked = rpc.call({"id": "f", "type": "fork", "entryId": points[1]["entryId"]})
    assert forked["data"] == {"text": "question <two>", "cancelled": False}
    fork_state = rpc.call({"type": "get_state"})["data"]
    assert fork_state["sessionId"] != original["sessionId"]
    header = json.loads(Path(fork_state["sessionFile"]).read_text().split("\n")[0])
    assert header["parentSession"] == original["sessionFile"]
    assert _texts(rpc.call({"type": "get_messages"})["data"]["messages"]) == ["question one", "answer one"]

    assert rpc.call({"type": "clone"})["data"] == {"cancelled": False}
    clone_state = rpc.call({"type": "get_state"})["data"]
    assert clone_state["sessionFile"] not in (fork_state["sessionFile"], original["sessionFile"])
    assert _texts(rpc.call({"type": "get_messages"})["data"]["messages"]) == ["question one", "answer one"]

    switched = rpc.call({"type": "switch_session", "sessionPath": original["sessionFile"]})
    assert switched["data"] == {"cancelled": False}
    assert len(rpc.call({"type": "get_messages"})["data"]["messages"]) == 4
    missing = rpc.call({"type": "switch_session", "sessionPath": str(tmp_path / "nope.jsonl")})
    assert missing["success"] is False and "does not exist" in missing["error"]

    out = tmp_path / "export.html"
    exported = rpc.call({"type": "export_html", "outputPath": str(out)})
    assert exported["data"] == {"path": str(out)}
    page = out.read_text()
    assert "question &lt;two&gt;" in page and "answer &lt;two&gt;" in page and "<two>" not in page

    assert rpc.call({"type": "new_session"})["data"] == {"cancelled": False}
    fresh = rpc.call({"type": "get_state"})["data"]
    assert fresh["sessionId"] not in (original["sessionId"], fork_state["sessionId"])
    assert rpc.call({"type": "get_messages"})["data"]["messages"] == []
    assert rpc.call({"type": "fork", "entryId": "00000000"})["success"] is False
    assert rpc.close() == 0


def test_export_shows_the_system_prompt_the_tools_and_carries_the_jsonl(
    rpc_factory: Any, tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    rpc = rpc_factory(
        "rpc-export-setup",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 30"}}]}, {"text": "Counted."}],
        "--append-system-prompt",
        "Always count <carefully>.",
    )
    rpc.call({"type": "prompt", "message": "count to thirty"})
    rpc.event("agent_end")
    state = rpc.call({"type": "get_state"})["data"]
    out = tmp_path / "export.html"
    assert rpc.call({"type": "export_html", "outputPath": str(out)})["success"] is True
    page = out.read_text()
    # pi's export of a live session: its system prompt and its tools, with their parameters.
    sent = scripted_server.requests_for("rpc-export-setup")[0].body["messages"][0]["content"]
    assert "System Prompt" in page and html.escape(sent) in page
    assert "Always count &lt;carefully&gt;." in page and "<carefully>" not in page
    assert "Available Tools" in page
    for tool in ("read", "bash", "edit", "write"):
        assert f'<span class="tool-name">{tool}</span>' in page
    assert '<span class="param">command</span>' in page
    # ... and pi's "↓ JSONL": the session file itself, byte for byte.
    link = re.search(r'download="([^"]+)"[^>]*href="data:application/x-ndjson;base64,([^"]+)"', page)
    assert link is not None
    assert link.group(1) == f"{state['sessionId']}.jsonl"
    assert base64.b64decode(link.group(2)) == Path(state["sessionFile"]).read_bytes()
    # `seq 1 30` printed 30 lines, not 31.
    assert "30 lines of output" in page and "31 lines" not in page
    assert rpc.close() == 0
