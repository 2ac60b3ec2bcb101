"""A reader that stops early (`tempi sessions list | head -1`) is not an error: tempi
stops writing quietly, as other command-line tools do when their pipe closes."""

from __future__ import annotations

import contextlib
import os
import sys

# What a shell reports for a program ended by SIGPIPE (128 + 13).
CLOSED_PIPE_EXIT = 141


def silence_stdout() -> None:
    """Point stdout at /dev/null, so what Python still holds in its buffer is dropped
    instead of raising again when it is flushed."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def flush_output() -> bool:
    """Flush stdout and stderr; False when stdout's reader had gone away."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return False
    with contextlib.suppress(BrokenPipeError):  # nobody is reading the messages either
        sys.stderr.flush()
    return True
