"""`--mode json` prints the bytes pi prints (issue 36, item 5): compact separators, pi's key
order, numbers spelled as JavaScript spells them, so `grep '"type":"agent_end"'` works.
Compared with pi 0.73.1's recorded stream for the same scripted conversation, ids and times
aside (and tool results' prose, which is tempi's own)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tempi.cli.pi_json import dumps
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.fixture_paths import PI_FIXTURES

PROMPT = "Create hello.py that prints hello, run it, then change the greeting to hi."
# Values that differ from run to run: ids, times and the working directory.
VOLATILE = re.compile(r'"(id|timestamp|responseId|toolCallId|cwd)":("[^"]*"|\d+)')
STREAMING = ("message_update", "tool_execution_update")
# Fields of pi's internal streaming state that leak into its partial tool calls.
PI_INTERNALS = {"partialArgs", "streamIndex"}


def _normalized(line: str) -> str:
    return VOLATILE.sub(lambda m: f'"{m.group(1)}":"<{m.group(1)}>"', line)


def _has_tool_prose(event: dict[str, Any]) -> bool:
    """Whether the line holds a tool result's text, which tempi words its own way."""
    return event["type"] in ("tool_execution_end", "turn_end", "agent_end") or (
        event.get("message", {}).get("role") == "toolResult"
    )


def _keys(value: Any) -> Any:
    """The nesting of keys, in order, without values: the shape pi's consumers see."""
    if isinstance(value, dict):
        return [(k, _keys(v)) for k, v in value.items() if k not in PI_INTERNALS]
    if isinstance(value, list):
        return [_keys(v) for v in value[:1]]
    return None


def test_json_mode_lines_are_pis_bytes(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "json-bytes", json.loads((PI_FIXTURES / "scenarios" / "basic.json").read_text())
    )
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    # The model pi's recording ran on (its cost is 0, so the usage lines can match).
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    write_models_json(home, scripted_server, "json-bytes", cost=zero)
    proc = run_tempi(
        ["--mode", "json", "--model", "mock/mock-model", "--tools", "read,bash,edit,write", "-p", PROMPT],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode == 0, proc.stderr
    ours = proc.stdout.splitlines()
    pis = (PI_FIXTURES / "events" / "basic-openai.jsonl").read_text().splitlines()

    assert any(line.startswith('{"type":"agent_end","messages":[') for line in ours)

    def whole_lines(lines: list[str]) -> list[str]:
        events = [json.loads(line) for line in lines]
        return [
            _normalized(line)
            for line, event in zip(lines, events, strict=True)
            if event["type"] not in STREAMING and not _has_tool_prose(event)
        ]

    # Header, agent and turn starts, user and assistant messages, tool starts: byte for byte.
    mine, theirs = whole_lines(ours), whole_lines(pis)
    assert len(mine) == len(theirs) > 20
    for line, expected in zip(mine, theirs, strict=True):
        assert line == expected

    # Every line, streaming ones and those with tool prose too, has pi's keys in pi's order.
    def shapes(lines: list[str]) -> list[tuple[str, Any]]:
        events = [json.loads(line) for line in lines]
        return sorted({(e["type"], json.dumps(_keys(e))) for e in events if e["type"] != "message_update"})

    assert shapes(ours) == shapes(pis)
    ours_updates = {
        json.dumps(_keys(e["assistantMessageEvent"])[:2])
        for e in map(json.loads, ours)
        if e["type"] == "message_update"
    }
    pis_updates = {
        json.dumps(_keys(e["assistantMessageEvent"])[:2])
        for e in map(json.loads, pis)
        if e["type"] == "message_update"
    }
    assert ours_updates == pis_updates  # type, then contentIndex


# What node 20 prints for JSON.stringify(n) of each.
JS_NUMBERS = [
    (0.0, "0"),
    (0.0006, "0.0006"),
    (1e-5, "0.00001"),
    (1.5e-7, "1.5e-7"),
    (1e-7, "1e-7"),
    (1e-6, "0.000001"),
    (123.456, "123.456"),
    (1e16, "10000000000000000"),
    (1e21, "1e+21"),
    (2.5e25, "2.5e+25"),
    (-3e-8, "-3e-8"),
    (0.1 + 0.2, "0.30000000000000004"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (float("nan"), "null"),
]


@pytest.mark.parametrize(("number", "expected"), JS_NUMBERS, ids=[text for _, text in JS_NUMBERS])
def test_numbers_are_spelled_as_javascript_spells_them(number: float, expected: str) -> None:
    assert dumps({"cost": number, "text": "héllo, wörld: \u2028"}) == (
        f'{{"cost":{expected},"text":"héllo, wörld: \u2028"}}'
    )
