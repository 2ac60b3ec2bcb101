"""Where sessions live and how to find them, in pi's layout so pi and tempi share files.

A root holds one directory per working directory (`session_dir_name`), each holding one
file per session named after its header (`session_file_name`). Lookups take several roots
(tempi's and pi's `sessions/`) and treat their files as one collection, whichever program
wrote them. Listing and lookup read headers and raw JSON only, without locks or typed
parsing, because they touch every file under the roots and must stay quick; a file that is
not a session is left out, not an error.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tempi.agent.base import PiModel
from tempi.agent.session_entries import SessionHeader
from tempi.store.errors import AmbiguousSessionError, SessionFileError, SessionNotFoundError
from tempi.store.file_format import parse_file, read_header


class SessionSummary(PiModel):
    path: Path
    id: str
    cwd: str
    name: str | None = None
    parent_session: str | None = None
    created: datetime
    modified: datetime
    message_count: int
    first_message: str | None = None
    # For overviews: the model last used ("provider/id"), the model's turns (assistant
    # messages) and what they used, over the whole file (every branch).
    model: str | None = None
    turns: int = 0
    tokens: int = 0
    cost: float = 0.0


def session_dir_name(cwd: str) -> str:
    """pi's directory name for a working directory: `/home/u/p` -> `--home-u-p--`."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def session_file_name(session_id: str, timestamp: str) -> str:
    """pi's file name: the header's ISO timestamp with `:` and `.` turned into `-`."""
    return timestamp.replace(":", "-").replace(".", "-") + f"_{session_id}.jsonl"


def session_dir_for(root: Path, cwd: str | Path) -> Path:
    return root / session_dir_name(str(cwd))


def _session_files(roots: Sequence[Path], cwd: str | Path | None = None) -> list[Path]:
    directories = [
        directory
        for root in roots
        for directory in ([session_dir_for(root, cwd)] if cwd is not None else _project_dirs(root))
    ]
    return _files_in(directories)


def _files_in(directories: list[Path]) -> list[Path]:
    files: list[Path] = []
    for directory in directories:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            files.extend(p for p in directory.iterdir() if p.suffix == ".jsonl" and p.is_file())
    return files


def _project_dirs(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _header_or_none(path: Path) -> SessionHeader | None:
    try:
        return read_header(path)
    except SessionFileError:
        return None


def list_sessions(roots: Sequence[Path], cwd: str | Path | None = None) -> list[SessionSummary]:
    """Sessions of one working directory, or of all when `cwd` is None; newest first."""
    summaries = [s for s in (_summarize(p) for p in _session_files(roots, cwd)) if s is not None]
    summaries.sort(key=lambda s: s.modified, reverse=True)
    return summaries


def find_session(roots: Sequence[Path], reference: str) -> Path:
    """A session file by path, full id or unique id prefix."""
    candidate = Path(reference).expanduser()
    if candidate.is_file():
        return candidate.absolute()
    if reference.endswith(".jsonl") or os.sep in reference:
        raise SessionNotFoundError(f"Session file {reference} does not exist")
    wanted = reference.strip().lower()
    if not wanted:
        raise SessionNotFoundError("No session id given")
    exact: list[Path] = []
    by_prefix: list[tuple[Path, str]] = []
    for path in _session_files(roots):
        header = _header_or_none(path)
        if header is None:
            continue
        if header.id.lower() == wanted:
            exact.append(path)
        elif header.id.lower().startswith(wanted):
            by_prefix.append((path, header.id))
    if len(exact) == 1:
        return exact[0]
    if not exact and len(by_prefix) == 1:
        return by_prefix[0][0]
    matches = [(p, wanted) for p in exact] or by_prefix
    if not matches:
        looked = " and ".join(str(root) for root in roots)
        raise SessionNotFoundError(f'No session matches "{reference}" (looked in {looked})')
    listed = "\n".join(f"  {session_id}  {path}" for path, session_id in sorted(matches)[:10])
    more = f"\n  ... and {len(matches) - 10} more" if len(matches) > 10 else ""
    raise AmbiguousSessionError(
        f'"{reference}" matches {len(matches)} sessions; give more of the id:\n{listed}{more}'
    )


def find_session_in(directory: Path, reference: str) -> Path | None:
    """The one session whose file lies directly in `directory` (a `sessionDir`) with id
    `reference`, or else the one whose id starts with it; None when there is no such one."""
    wanted = reference.strip().lower()
    if not wanted:
        return None
    headers = [(path, header) for path in _files_in([directory]) if (header := _header_or_none(path))]
    exact = [path for path, header in headers if header.id.lower() == wanted]
    by_prefix = [path for path, header in headers if header.id.lower().startswith(wanted)]
    for found in (exact, by_prefix):
        if len(found) == 1:
            return found[0].absolute()
    return None


def other_file_with_id(roots: Sequence[Path], path: Path, header: SessionHeader) -> Path | None:
    """Another file under `roots` holding session `header.id`, when `path` is a copy of it.

    A file at the place its header names in one of the roots (pi's layout) is the original
    however many copies exist; elsewhere, any other file of the same id makes `path` the
    copy. Hard links are one file, not copies."""
    name = session_file_name(header.id, header.timestamp)
    canonical = [session_dir_for(root, header.cwd) / name for root in roots]
    if any(_same_file(place, path) for place in canonical):
        return None
    candidates = [*canonical, *sorted(_session_files(roots))]
    for candidate in candidates:
        if _same_file(candidate, path):
            continue
        other = _header_or_none(candidate)
        if other is not None and other.id == header.id:
            return candidate.absolute()
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def most_recent(roots: Sequence[Path], cwd: str | Path) -> Path | None:
    """The session of `cwd` whose file changed last (for --continue)."""
    return _newest(_session_files(roots, cwd))


def _newest(files: list[Path]) -> Path | None:
    valid = [p for p in files if _header_or_none(p) is not None]
    return max(valid, key=lambda p: p.stat().st_mtime_ns, default=None)


# A `sessionDir` (settings or --session-dir) holds session files directly, not one folder
# per working directory: pi keeps, lists and continues sessions there whatever their cwd.


def most_recent_in(directory: Path) -> Path | None:
    """The session file in `directory` that changed last (pi's --continue with sessionDir)."""
    return _newest(_files_in([directory]))


def list_sessions_in(directory: Path) -> list[SessionSummary]:
    """The sessions whose files lie directly in `directory`, newest first."""
    summaries = [s for s in (_summarize(p) for p in _files_in([directory])) if s is not None]
    summaries.sort(key=lambda s: s.modified, reverse=True)
    return summaries


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _summarize(path: Path) -> SessionSummary | None:
    """A listing row read straight from the JSON (no typed parsing: listing must be quick)."""
    try:
        data = path.read_bytes()
        parsed = parse_file(data, path)
        modified_fallback = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    except (OSError, SessionFileError):
        return None
    header = parsed.header
    name: str | None = None
    message_count = 0
    first_message: str | None = None
    last_activity_ms: int | None = None
    model: str | None = None
    turns, tokens, cost = 0, 0, 0.0
    for entry in parsed.raw_entries:
        if entry.get("type") == "session_info":
            name = str(entry.get("name") or "").strip() or None
        if entry.get("type") == "model_change":
            model = f"{entry.get('provider', '')}/{entry.get('modelId', '')}"
        if entry.get("type") != "message" or not isinstance(entry.get("message"), dict):
            continue
        message_count += 1
        message = entry["message"]
        if message.get("role") not in ("user", "assistant"):
            continue
        if message.get("role") == "assistant":
            turns += 1
            model = f"{message.get('provider', '')}/{message.get('model', '')}"
            usage = message.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            tokens += int(sum(_number(usage.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite")))
            spent = usage.get("cost")
            cost += _number(spent.get("total") if isinstance(spent, dict) else None)
        if isinstance(message.get("timestamp"), int | float):
            last_activity_ms = max(last_activity_ms or 0, int(message["timestamp"]))
        if first_message is None and message.get("role") == "user":
            first_message = _message_text(message) or None
    created = _parse_time(header.get("timestamp")) or modified_fallback
    modified = datetime.fromtimestamp(last_activity_ms / 1000, tz=UTC) if last_activity_ms else created
    return SessionSummary(
        path=path.absolute(),
        id=str(header["id"]),
        cwd=str(header.get("cwd") or ""),
        name=name,
        parent_session=header.get("parentSession") if isinstance(header.get("parentSession"), str) else None,
        created=created,
        modified=modified,
        message_count=message_count,
        first_message=first_message,
        model=model,
        turns=turns,
        tokens=tokens,
        cost=cost,
    )


class SummaryCache:
    """`list_sessions` of every session, for a caller that asks again and again (the web
    console's overview): a file is read again only when its size or mtime changed, so a
    refresh of a thousand sessions stats them instead of parsing them."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = list(roots)
        self._rows: dict[Path, tuple[tuple[int, int], SessionSummary | None]] = {}

    def list(self) -> list[SessionSummary]:
        rows: dict[Path, tuple[tuple[int, int], SessionSummary | None]] = {}
        for path in _session_files(self.roots):
            row = self._row(path)
            if row is not None:
                rows[path] = row
        self._rows = rows  # files gone since the last call leave with it
        summaries = [summary for _, summary in rows.values() if summary is not None]
        summaries.sort(key=lambda s: s.modified, reverse=True)
        return summaries

    def summary(self, path: Path) -> SessionSummary | None:
        """One file's row, as the overview shows it (a session page's name), wherever the
        file lies: a Slack conversation's or a pipeline shard's is outside the roots."""
        row = self._row(path)
        if row is None:
            return None
        self._rows[path] = row
        return row[1]

    def _row(self, path: Path) -> tuple[tuple[int, int], SessionSummary | None] | None:
        try:
            info = path.stat()
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_size)
        cached = self._rows.get(path)
        return cached if cached is not None and cached[0] == stamp else (stamp, _summarize(path))
