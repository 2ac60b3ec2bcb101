"""Glob patterns over repository paths: `*` and `?` stay inside one directory, `**` spans
any number of them, and a pattern always matches from the repository's top."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip().removeprefix("./")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            at_start = i == 0 or pattern[i - 1] == "/"
            i += 2
            if at_start and i < n and pattern[i] == "/":
                out.append("(?:.*/)?")  # `a/**/b` matches a/b too
                i += 1
            elif at_start and i == n:
                out.append(".*")
            else:
                out.append("[^/]*")  # `a**b` is just a `*`
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, pattern: str) -> bool:
    return glob_regex(pattern).match(path) is not None


def excluded(path: str, patterns: list[str]) -> bool:
    """A pattern excludes a file it matches, and everything under a directory it matches
    (`src/vendor` leaves out the whole directory, as `src/vendor/**` does)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    return any(matches(prefix, p) for p in patterns for prefix in prefixes)
