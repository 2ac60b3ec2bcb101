"""The words that name a `tempi` command rather than start a prompt, kept apart from the
flag parser so the entry point can read them before anything heavy loads."""

from __future__ import annotations

SUBCOMMANDS = ("sessions", "mcp", "attach", "steer", "follow-up", "abort", "stop", "server", "worker")
# Commands with a parser of their own, dispatched before the subcommands above.
OWN_COMMANDS = ("slack", "pipeline", "codec-server", "web")
