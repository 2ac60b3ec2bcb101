"""pi's commands that only tell something: /changelog, and /share, which has no tempi
counterpart and says what to do instead."""

from __future__ import annotations

from pathlib import Path

from rich.markdown import Markdown

import tempi
from tempi.cli.interactive.extras_host import ExtrasHost
from tempi.cli.interactive.render import notice

CHANGELOG = "CHANGELOG.md"
# Shown in full; an older entry is a scroll away in the file itself.
CHANGELOG_SECTIONS = 2


def changelog_path() -> Path:
    # A checkout (or an editable install) has it beside the package.
    return Path(tempi.__file__).resolve().parent.parent / CHANGELOG


def recent_changes(text: str, sections: int = CHANGELOG_SECTIONS) -> str:
    """The file's newest `sections` level-2 sections."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not starts:
        return text
    end = starts[sections] if len(starts) > sections else len(lines)
    return "\n".join(lines[starts[0] : end]).strip()


async def cmd_changelog(app: ExtrasHost, arg: str) -> None:
    path = changelog_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        await app.show(
            notice(
                "This copy of tempi was installed without its CHANGELOG.md; the project's repository has it."
            )
        )
        return
    await app.show(notice(f"── what's new ({path}) ──"), Markdown(recent_changes(text)))


async def cmd_share(app: ExtrasHost, arg: str) -> None:
    await app.show(
        notice(
            "/share needs pi's GitHub gist upload, which tempi does not have. /export writes the session "
            "as one HTML file you can share yourself.",
            "yellow",
        )
    )
