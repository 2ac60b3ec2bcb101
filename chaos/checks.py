"""What must hold after every fault: the session ended (its final answer, or an error that
says what went wrong), the JSONL holds every entry once and in tree order, and the
workspace matches what the tool results claim."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FINAL_TEXT = "All steps done."
LOG_FILE = "log.txt"


class ChaosFailure(AssertionError):
    """An invariant that did not hold, with what was seen."""


@dataclass
class SessionFacts:
    entries: list[dict[str, Any]]
    ended: str  # "completed" or "failed: <error>"
    tool_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_results: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_session(path: Path) -> list[dict[str, Any]]:
    lines = path.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for n, line in enumerate(lines, 1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ChaosFailure(f"{path.name}: line {n} is not JSON ({err.msg}): {line[:120]!r}") from err
    return out


def check_session(path: Path, *, final_text: str = FINAL_TEXT) -> SessionFacts:
    entries = read_session(path)
    if not entries or entries[0].get("type") != "session":
        raise ChaosFailure(f"{path.name}: no session header on the first line")
    body = entries[1:]
    ids = [e.get("id") for e in body]
    twice = [i for i, c in Counter(ids).items() if c > 1]
    if twice:
        raise ChaosFailure(f"{path.name}: entries written more than once: {twice[:5]}")
    for prev, entry in itertools.pairwise(body):
        if entry.get("parentId") != prev.get("id"):
            raise ChaosFailure(
                f"{path.name}: entry {entry.get('id')} ({_describe(entry)}) has parent {entry.get('parentId')}, "
                f"but the line before it is {prev.get('id')} ({_describe(prev)})"
            )
    facts = SessionFacts(entries=entries, ended="")
    for entry in body:
        message = entry.get("message") if entry.get("type") == "message" else None
        if not message:
            continue
        if message.get("role") == "assistant":
            for block in message.get("content", []):
                if block.get("type") == "toolCall":
                    facts.tool_calls[block["id"]] = block
        elif message.get("role") == "toolResult":
            if message["toolCallId"] in facts.tool_results:
                raise ChaosFailure(f"{path.name}: two results for tool call {message['toolCallId']}")
            facts.tool_results[message["toolCallId"]] = message
    missing = [cid for cid in facts.tool_calls if cid not in facts.tool_results]
    if missing:
        raise ChaosFailure(f"{path.name}: tool calls without a result: {missing[:5]}")
    last = body[-1].get("message", {}) if body else {}
    if last.get("role") != "assistant":
        raise ChaosFailure(f"{path.name}: the session did not end with an assistant message")
    text = "".join(b.get("text", "") for b in last.get("content", []) if b.get("type") == "text")
    if last.get("stopReason") == "stop" and text == final_text:
        facts.ended = "completed"
    elif last.get("stopReason") == "error" and (last.get("errorMessage") or "").strip():
        facts.ended = f"failed: {last['errorMessage']}"
    else:
        raise ChaosFailure(
            f"{path.name}: the last message neither finished the script nor carried an error "
            f"(stopReason {last.get('stopReason')!r}, text {text[:80]!r})"
        )
    return facts


def _describe(entry: dict[str, Any]) -> str:
    message = entry.get("message")
    return (
        f"{entry.get('type')}/{message.get('role')}" if isinstance(message, dict) else str(entry.get("type"))
    )


def result_text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result.get("content", []) if b.get("type") == "text")


def check_workspace(facts: SessionFacts, cwd: Path) -> None:
    """Every command a result says ran left its line exactly once; no command ran twice;
    every file a result says was written holds what was written."""
    log = cwd / LOG_FILE
    lines = log.read_text().splitlines() if log.exists() else []
    counts = Counter(lines)
    repeated = [line for line, c in counts.items() if c > 1]
    if repeated:
        raise ChaosFailure(f"commands ran more than once: {repeated[:5]}")
    expected_lines = set()
    for cid, call in facts.tool_calls.items():
        result = facts.tool_results[cid]
        args = call.get("arguments", {})
        if call["name"] == "bash":
            marker = args["command"].split("echo ", 1)[1].split(" >>", 1)[0]
            expected_lines.add(marker)
            if not result.get("isError") and counts[marker] != 1:
                raise ChaosFailure(
                    f"bash result for {marker!r} says it ran, but the log has it {counts[marker]} times"
                )
        elif call["name"] == "write" and not result.get("isError"):
            target = cwd / args["path"]
            if not target.exists() or target.read_text() != args["content"]:
                raise ChaosFailure(
                    f"write result says {args['path']} was written, but the file does not hold it"
                )
        elif call["name"] == "read" and not result.get("isError"):
            target = cwd / args["path"]
            if target.read_text().splitlines()[0] not in result_text(result):
                raise ChaosFailure(f"read result for {args['path']} does not show the file")
    phantom = set(lines) - expected_lines
    if phantom:
        raise ChaosFailure(f"the log holds commands no tool call asked for: {sorted(phantom)[:5]}")


def check_script_followed(facts: SessionFacts, steps: int) -> None:
    """A completed session made every scripted tool call (a skipped step means a turn was
    answered from the wrong place in the script)."""
    if facts.ended != "completed":
        return
    if len(facts.tool_calls) != steps:
        raise ChaosFailure(f"the script has {steps} tool calls; the session made {len(facts.tool_calls)}")
