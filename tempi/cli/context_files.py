"""Project instructions: AGENTS.md (or CLAUDE.md) files appended to the system prompt.

Looked for in $TEMPI_HOME first (pi's `~/.pi/agent` when tempi's home has none), then in every directory from the filesystem root down to
the working directory, so the nearest file comes last and speaks last. In each directory
AGENTS.md wins over CLAUDE.md, as in pi.
"""

from __future__ import annotations

from pathlib import Path

from tempi.agent.system_prompt import ContextFile

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")


def _file_in(directory: Path) -> ContextFile | None:
    for name in CONTEXT_FILE_NAMES:
        path = directory / name
        try:
            if path.is_file():
                return ContextFile(path=str(path), content=path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return None


def discover_context_files(cwd: Path, home: Path, pi_home: Path | None = None) -> list[ContextFile]:
    found: list[ContextFile] = []
    seen: set[str] = set()
    directories = [home, *reversed([cwd, *cwd.parents])]
    for directory in directories:
        item = _file_in(directory)
        if item is None and directory == home and pi_home is not None:
            item = _file_in(pi_home)
        if item is None:
            continue
        key = str(Path(item.path).resolve())
        if key not in seen:
            seen.add(key)
            found.append(item)
    return found
