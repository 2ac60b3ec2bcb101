"""The git branch pi's footer shows beside the working directory, read from the HEAD file
(no git process): the nearest `.git` above the directory, a worktree's `gitdir:` file
followed."""

from __future__ import annotations

from pathlib import Path

REF_PREFIX = "ref: refs/heads/"


def _head_file(directory: Path) -> Path | None:
    for folder in [directory, *directory.parents]:
        dot_git = folder / ".git"
        try:
            if dot_git.is_dir():
                return dot_git / "HEAD"
            if dot_git.is_file():
                pointer = dot_git.read_text(encoding="utf-8").strip()
                if not pointer.startswith("gitdir: "):
                    return None
                return (folder / pointer.removeprefix("gitdir: ").strip()).resolve() / "HEAD"
        except OSError:
            return None
    return None


def git_branch(directory: Path) -> str | None:
    """The checked-out branch, "detached" for a detached HEAD (as pi), None outside a repository."""
    head = _head_file(directory)
    if head is None:
        return None
    try:
        text = head.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if text.startswith(REF_PREFIX):
        return text.removeprefix(REF_PREFIX)
    return "detached" if text else None
