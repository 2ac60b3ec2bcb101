"""What the key actions need of the interactive app, beyond what the commands need."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from tempi.cli.interactive.commands import CommandHost
from tempi.cli.interactive.picker import Picker
from tempi.cli.interactive.render import Display


class KeyHost(CommandHost, Protocol):
    display: Display
    picker: Picker | None

    def spawn(self, coro: Awaitable[Any]) -> None: ...
