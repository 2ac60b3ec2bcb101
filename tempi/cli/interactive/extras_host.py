"""What the commands added after the first set (settings, reload, clone, import, notes)
need of the interactive app. A Protocol of its own, so their modules do not import
commands.py, which lists them."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

from rich.console import RenderableType

from tempi.agent.skills import Skill
from tempi.cli.interactive.footer import FooterInfo
from tempi.cli.interactive.picker import Picker
from tempi.cli.interactive.render import Display
from tempi.cli.plan import PlannedRun
from tempi.cli.session_choice import OpenSession
from tempi.client import SessionClient, SessionService


class ExtrasHost(Protocol):
    planned: PlannedRun
    # The flags the app started with: /reload plans from them again (None: nothing to re-read).
    args: argparse.Namespace | None
    skills: list[Skill]
    service: SessionService
    cwd: Path
    session_dir: Path | None
    footer: FooterInfo
    display: Display

    @property
    def session(self) -> SessionClient: ...

    async def show(self, *blocks: RenderableType) -> None: ...

    def open_picker(self, picker: Picker) -> None: ...

    def set_completion_rows(self, rows: int) -> None: ...

    def spawn(self, coro: Awaitable[Any]) -> None: ...

    async def ask(self, message: str, placeholder: str | None = None) -> str: ...

    async def run_dialog(self, work: Coroutine[Any, Any, Any]) -> bool: ...

    async def refresh_footer(self, *, estimate_context: bool = False) -> None: ...

    async def use_session(self, opened: OpenSession, *, history: bool) -> None: ...


ExtraHandler = Callable[[ExtrasHost, str], Awaitable[None]]
