"""File modes of everything tempi writes about a session.

Session files, their side files and the folders holding them carry whole conversations and
command output, so they are the owner's only, whatever the umask.
"""

from __future__ import annotations

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
