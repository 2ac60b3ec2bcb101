"""What a sandboxed session must not be able to reach from its workspace: its own session
file and side files (the model could rewrite its history, or swap the output folder for a
link and have the worker write outside), and tempi's home where a sandbox would show it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tempi.cli.errors import UserError
from tempi.config.paths import tempi_home
from tempi.workflows.session_types import SandboxKind


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_sandbox_reach(sandbox: SandboxKind, workspace: Path, session_folder: Path) -> None:
    """Raises UserError when the session's folder (or, for container sandboxes, tempi's home)
    lies inside the workspace a sandbox gives the model; warns when the workspace is the
    whole home directory."""
    if sandbox == "local":
        return
    workspace = workspace.resolve()
    folder = session_folder.resolve()
    if _inside(folder, workspace):
        raise UserError(
            f"The session would be kept in {folder}, inside the workspace {workspace}, where the "
            f"model under --sandbox {sandbox} could read and rewrite it. Set sessionDir (or "
            "--session-dir) to a folder outside the workspace, or run from another directory."
        )
    home = tempi_home().resolve()
    # bwrap covers tempi's home with an empty stand-in; a container's mount would show it.
    if sandbox in ("docker", "container") and _inside(home, workspace):
        raise UserError(
            f"tempi's home {home} (API keys, sessions) is inside the workspace {workspace}, which "
            f"--sandbox {sandbox} mounts for the model. Run from a directory that does not hold it."
        )
    user_home = Path(os.path.expanduser("~")).resolve()
    if _inside(user_home, workspace):
        print(
            f"tempi: warning: the workspace {workspace} holds your whole home directory; under "
            f"--sandbox {sandbox} the model can read and change all of it but the credential files "
            "tempi knows (~/.ssh, ~/.aws, ~/.git-credentials, ~/.npmrc, shell histories, ...). "
            "Run tempi from the project's own directory instead.",
            file=sys.stderr,
        )
