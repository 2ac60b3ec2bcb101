"""A worker whose secrets its tools cannot read.

A worker runs commands other people's sessions ask for, as its own user. Anything in its
environment is one `cat /proc/<pid>/environ` away from them: the worker's, and the
container's first process's (an init, or the worker), which is the container's. So at start
`tempi worker`

- takes the secrets tempi reads itself out of its environment and keeps them in memory
  (config/secret_files.py); commands it starts inherit none of them. Given as `NAME_FILE`
  instead, they are in no environment at all;
- blanks those values in the copy of its initial environment the kernel shows as
  /proc/<pid>/environ (which a change to the environment leaves as it was);
- marks itself not dumpable (prctl PR_SET_DUMPABLE 0): its /proc files (environ, mem, maps)
  then belong to root, and a process of the same user cannot read them, nor attach to it.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from tempi.config.env_api_keys import ENV_KEY_VARIABLES
from tempi.config.secret_files import FILE_SUFFIX, hold, read_secret_file

CODEC_KEYS = "TEMPI_CODEC_KEYS"  # its file variant is the codec's own (workers/codec.py)
TEMPORAL_API_KEY = "TEMPORAL_API_KEY"

# tempi reads each of these itself, so it can keep them in memory; a cloud SDK's variables
# (AWS_*, GOOGLE_APPLICATION_CREDENTIALS) are read by the SDK from the environment and stay.
WITHHELD: frozenset[str] = frozenset(
    {name for names in ENV_KEY_VARIABLES.values() for name in names} | {CODEC_KEYS, TEMPORAL_API_KEY}
)
_PR_SET_DUMPABLE = 4


def withhold_secrets() -> list[str]:
    """Move tempi's secrets from this process's environment into its memory, and check that
    the files their `_FILE` variants name can be read (a bad mount stops the worker at start,
    not at its first session). The names moved."""
    taken = []
    for name in sorted(WITHHELD):
        value = os.environ.pop(name, None)
        if value:
            hold(name, value)
            taken.append(name)
        elif name != CODEC_KEYS and (path := os.environ.get(name + FILE_SUFFIX)):
            read_secret_file(name, path)
    if taken:
        _blank_initial_environment(frozenset(taken))
    return taken


def _blank_initial_environment(names: frozenset[str]) -> None:
    """Overwrite the values of `names` in the process's initial environment block, which
    /proc/<pid>/environ reads (to root, or where the process stays dumpable). Nothing points
    there any more once the variables are unset; Python keeps its own copies."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        # After the command's name: field 3 is fields[0]; env_start and env_end are 50 and 51.
        start, end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return
    if not 0 < start < end:
        return
    block = ctypes.string_at(start, end - start)
    offset = 0
    for entry in block.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and value and name.decode(errors="replace") in names:
            ctypes.memset(start + offset + len(name) + 1, ord("*"), len(value))
        offset += len(entry) + 1


def forbid_inspection() -> bool:
    """Make this process's /proc files readable by root only; False where the platform has
    no such switch."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
