"""The `tempi` command's entry point. A command that will run a session on the background
service starts that service first, so it boots while the command loads its own modules
(a second of CPU) instead of after; everything else is tempi.cli.main."""

from __future__ import annotations

import os
import sys

from tempi.cli.command_words import OWN_COMMANDS, SUBCOMMANDS
from tempi.cli.pi_commands import PI_ONLY_COMMANDS

# Flags after which the command answers without a session.
_NO_SESSION_FLAGS = {"-h", "--help", "-v", "--version", "--list-models", "--export"}


def needs_the_service(argv: list[str]) -> bool:
    """Whether this command line opens a session on the background service (a guess made
    before parsing; main stops a service it started for a command that then failed early)."""
    if _names_a_cluster():
        return False
    if argv and argv[0] in (*SUBCOMMANDS, *OWN_COMMANDS, *PI_ONLY_COMMANDS):
        return False
    return not any(arg.split("=", 1)[0] in _NO_SESSION_FLAGS for arg in argv)


def _names_a_cluster() -> bool:
    """Whether Temporal settings may name a server of their own, so the embedded one may not
    be wanted (main decides after reading them; starting early is only a head start). A
    temporal.toml counts only once TEMPORAL_PROFILE or TEMPORAL_CONFIG_FILE chooses it."""
    return any(os.environ.get(name) for name in ("TEMPORAL_ADDRESS", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE"))


def main() -> None:
    argv = sys.argv[1:]
    if not needs_the_service(argv):
        from tempi.cli.main import main as run

        run(argv)
        return
    from tempi.config.paths import ForeignHomeError, tempi_home
    from tempi.workers.service import drop_unneeded, start_early

    try:
        home = tempi_home()
    except ForeignHomeError as err:
        print(f"tempi: {err}", file=sys.stderr)
        sys.exit(3)  # main's EXIT_CONFIG, without importing it
    start_early(home)
    try:
        from tempi.cli.main import main as run

        run(argv)  # ends the process itself, after drop_unneeded
    finally:
        drop_unneeded()  # the flag parser exits on a bad flag without returning
