"""Glob patterns for find, with the usual shell/fd meaning.

`*` and `?` stay within one path segment, `**` spans directories (`**/` may match
nothing), `[abc]`/`[!abc]` are character classes and `{a,b}` alternatives. A pattern
without `/` is matched against the file name at any depth; one with `/` against the
path relative to the search root.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass


def _closing(pattern: str, start: int, opening: str, closing: str) -> int:
    """Index of the bracket closing the one at `start`, or -1."""
    depth = 0
    for index in range(start, len(pattern)):
        if pattern[index] == opening:
            depth += 1
        elif pattern[index] == closing:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_alternatives(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in body:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current))
    return parts


def _translate(pattern: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[" and (end := pattern.find("]", index + 2)) != -1:
            body = pattern[index + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append(f"[{'^' if negate else ''}{body.replace(chr(92), chr(92) * 2)}]")
            index = end + 1
        elif char == "{" and (end := _closing(pattern, index, "{", "}")) != -1:
            alternatives = _split_alternatives(pattern[index + 1 : end])
            out.append("(?:" + "|".join(_translate(alternative) for alternative in alternatives) + ")")
            index = end + 1
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


@dataclass(frozen=True)
class GlobMatcher:
    regex: re.Pattern[str]
    whole_path: bool
    directories_only: bool  # the pattern ended with "/"

    @classmethod
    def compile(cls, pattern: str) -> GlobMatcher:
        pattern = pattern.strip().removeprefix("./").lstrip("/")
        directories_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        try:
            regex = re.compile(f"^{_translate(pattern)}$", re.DOTALL)
        except re.error as error:
            raise ValueError(f"invalid glob pattern {pattern!r}: {error}") from None
        return cls(regex, "/" in pattern, directories_only)

    def matches(self, relative_path: str, is_dir: bool = False) -> bool:
        if self.directories_only and not is_dir:
            return False
        subject = relative_path if self.whole_path else posixpath.basename(relative_path)
        return self.regex.match(subject) is not None
