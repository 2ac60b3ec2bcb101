"""pi's session file format: JSONL, version 3, a header line then one entry per line.

Reading is forgiving because pi's files are hand-edited and crash-torn: a line that is not
an entry is counted and skipped, never fatal; only a missing header is. Files written by pi
versions 1 and 2 are upgraded here, in memory and deterministically, so two processes
upgrading the same file agree byte for byte (writing the result back is `appends`' job).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tempi.agent.session_entries import CURRENT_SESSION_VERSION, SessionEntry, SessionHeader, parse_entry
from tempi.store.errors import SessionFileError


def loads(text: str | bytes) -> Any:
    """`json.loads`, where JSON nested too deeply to parse (a line of 100000 `[`, which
    raises RecursionError) is malformed like any other line that is not JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None


def decode_lines(data: bytes) -> list[str]:
    lines = []
    # Only "\n" ends a line: U+2028 and friends may sit inside JSON strings.
    for raw in data.split(b"\n"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "\x00"  # counted as a malformed line below
        if text.strip():
            lines.append(text)
    return lines


def parse_header(line: str | None, path: Path) -> dict[str, Any]:
    try:
        header = loads(line) if line is not None else None
    except json.JSONDecodeError:
        header = None
    if (
        not isinstance(header, dict)
        or header.get("type") != "session"
        or not isinstance(header.get("id"), str)
    ):
        raise SessionFileError(f"{path} is not a session file: its first line is not a session header")
    return header


def _derived_id(session_id: str, index: int, taken: set[str]) -> str:
    # Deterministic, so two processes upgrading the same file agree on the ids.
    salt = 0
    while True:
        candidate = hashlib.sha256(f"{session_id}:{index}:{salt}".encode()).hexdigest()[:8]
        if candidate not in taken:
            return candidate
        salt += 1


def _upgrade_v1(header: dict[str, Any], raw: list[dict[str, Any]]) -> None:
    """Version 1 had no ids: link the entries into one chain in file order, and turn a
    compaction's `firstKeptEntryIndex` (a line index counting the header) into an id."""
    taken: set[str] = set()
    previous: str | None = None
    for index, entry in enumerate(raw):
        entry["id"] = _derived_id(str(header["id"]), index, taken)
        taken.add(entry["id"])
        entry["parentId"] = previous
        previous = entry["id"]
        if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
            target = entry.pop("firstKeptEntryIndex")
            if isinstance(target, int) and 1 <= target <= index:
                entry["firstKeptEntryId"] = raw[target - 1]["id"]


def _upgrade_v2(raw: list[dict[str, Any]]) -> None:
    """Version 3 renamed the `hookMessage` role to `custom`."""
    for entry in raw:
        message = entry.get("message")
        if (
            entry.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            message["role"] = "custom"


@dataclass
class ParsedFile:
    header: dict[str, Any]
    raw_entries: list[dict[str, Any]]
    skipped: int
    old_version: int | None


def _raw_entries(lines: list[str]) -> tuple[list[dict[str, Any]], int]:
    """JSON objects with a string `type` (other than a header), and how many lines were not."""
    raw: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        try:
            value = loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(value, dict) and isinstance(value.get("type"), str) and value.get("type") != "session":
            raw.append(value)
        else:
            skipped += 1
    return raw, skipped


def parse_file(data: bytes, path: Path) -> ParsedFile:
    lines = decode_lines(data)
    header = parse_header(lines[0] if lines else None, path)
    raw, skipped = _raw_entries(lines[1:])
    version = header.get("version", 1)
    version = version if isinstance(version, int) else 1
    old_version = version if version < CURRENT_SESSION_VERSION else None
    if version < 2:
        _upgrade_v1(header, raw)
    if version < 3:
        _upgrade_v2(raw)
        header["version"] = CURRENT_SESSION_VERSION
    return ParsedFile(header, raw, skipped, old_version)


def typed_entries(raw: list[dict[str, Any]]) -> tuple[list[SessionEntry], int]:
    entries: list[SessionEntry] = []
    skipped = 0
    for value in raw:
        try:
            entries.append(parse_entry(value))
        except ValidationError:
            skipped += 1
    return entries, skipped


def entries_in(data: bytes) -> tuple[list[SessionEntry], int]:
    """Typed entries of some version-3 entry lines, and how many lines were skipped."""
    raw, skipped = _raw_entries(decode_lines(data))
    entries, unreadable = typed_entries(raw)
    return entries, skipped + unreadable


# Line numbers a warning lists before it says "and N more".
MAX_LISTED_LINES = 10


def _numbers(lines: list[int]) -> str:
    listed = ", ".join(str(n) for n in lines[:MAX_LISTED_LINES])
    return listed + (f" and {len(lines) - MAX_LISTED_LINES} more" if len(lines) > MAX_LISTED_LINES else "")


def parent_cycles(parent_of: Mapping[str, str | None]) -> list[list[str]]:
    """The loops among parentIds (an entry its own parent is a loop of one), each as the ids
    on it; a walk up from any entry of a loop never reaches a root. Linear in the entries."""
    done: set[str] = set()
    cycles: list[list[str]] = []
    for start in parent_of:
        walk: list[str] = []
        on_walk: dict[str, int] = {}
        node: str | None = start
        while node is not None and node in parent_of and node not in done and node not in on_walk:
            on_walk[node] = len(walk)
            walk.append(node)
            node = parent_of[node]
        if node is not None and node in on_walk:
            cycles.append(walk[on_walk[node] :])
        done.update(walk)
    return cycles


def file_problems(data: bytes) -> list[str]:
    """What is wrong with a version-3 file, by line number (1 is the header): lines that are
    not entries, ids used twice, parentIds naming no entry, an entry its own parent, and
    parentIds that loop. Empty for a sound file."""
    not_entries: list[int] = []
    first_line_of: dict[str, int] = {}
    # As the session tree reads the file: of entries sharing an id, the last one counts.
    last_line_of: dict[str, int] = {}
    parent_of: dict[str, str | None] = {}
    repeated: list[str] = []
    parents: list[tuple[int, str]] = []
    for number, raw in enumerate(data.split(b"\n")[1:], start=2):
        if not raw.strip():
            continue
        try:
            value = loads(raw)
            entry = parse_entry(value) if isinstance(value, dict) and value.get("type") != "session" else None
        except (json.JSONDecodeError, UnicodeDecodeError, ValidationError):
            entry = None
        if entry is None:
            not_entries.append(number)
            continue
        if entry.id in first_line_of:
            repeated.append(f"line {number} repeats the id {entry.id!r} of line {first_line_of[entry.id]}")
        else:
            first_line_of[entry.id] = number
        last_line_of[entry.id] = number
        parent_of[entry.id] = entry.parent_id
        if entry.parent_id is not None:
            parents.append((number, entry.parent_id))
    problems: list[str] = []
    if not_entries:
        problems.append(
            f"{'line' if len(not_entries) == 1 else 'lines'} {_numbers(not_entries)} "
            f"{'is not a session entry' if len(not_entries) == 1 else 'are not session entries'} (skipped)"
        )
    problems.extend(repeated[:MAX_LISTED_LINES])
    if len(repeated) > MAX_LISTED_LINES:
        problems.append(f"... and {len(repeated) - MAX_LISTED_LINES} more repeated ids")
    dangling = [number for number, parent in parents if parent not in first_line_of]
    if dangling:
        problems.append(
            f"{'line' if len(dangling) == 1 else 'lines'} {_numbers(dangling)}: "
            "parentId names no entry in the file (the branch is cut off there)"
        )
    loops = sorted(sorted(last_line_of[i] for i in cycle) for cycle in parent_cycles(parent_of))
    for lines in loops[:MAX_LISTED_LINES]:
        if len(lines) == 1:
            problems.append(f"line {lines[0]}: parentId names the entry itself (the branch is cut off there)")
        else:
            problems.append(
                f"lines {_numbers(lines)}: their parentIds form a cycle (the branch is cut off there)"
            )
    if len(loops) > MAX_LISTED_LINES:
        problems.append(f"... and {len(loops) - MAX_LISTED_LINES} more parentId cycles")
    return problems


def json_line(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def line_id(line: bytes) -> str | None:
    try:
        value = loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(value, dict) and value.get("type") != "session" and isinstance(value.get("id"), str):
        return value["id"]
    return None


def is_json_object(line: bytes) -> bool:
    try:
        return isinstance(loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def header_model(header: dict[str, Any], path: Path) -> SessionHeader:
    try:
        return SessionHeader.model_validate(header)
    except ValidationError as exc:
        raise SessionFileError(f"{path} has an unreadable session header: {exc.errors()[0]['msg']}") from None


def read_header(path: Path) -> SessionHeader:
    """The header alone: listing and lookup must not read whole files or take locks."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline().decode("utf-8", errors="replace")
    except OSError as exc:
        raise SessionFileError(f"Cannot read session file {path}: {exc}") from None
    return header_model(parse_header(first, path), path)
