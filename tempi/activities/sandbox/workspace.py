"""The workspace's starting point, and the patch of everything changed since.

When a sandbox starts, the workspace (made a git repository if it is not one) gets a
commit of its current content under `refs/tempi/base`, without touching the user's
branch, index or stash. The patch is the difference between that commit and the files
now in the workspace, untracked ones included and ignored ones left out, in a form
`git apply` takes (binary files too). Both run inside the container as its user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tempi.activities.sandbox.errors import SandboxError

if TYPE_CHECKING:
    from tempi.activities.sandbox.docker_backend import DockerBackend

WORKSPACE_DIR = "/workspace"
BASE_REF = "refs/tempi/base"

# Who records the base commit; safe.directory because a mounted workspace is often owned
# by a different uid than the sandbox user, which git otherwise refuses to work in.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "tempi",
    "GIT_AUTHOR_EMAIL": "tempi@localhost",
    "GIT_COMMITTER_NAME": "tempi",
    "GIT_COMMITTER_EMAIL": "tempi@localhost",
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
    "GIT_CONFIG_KEY_1": "init.defaultBranch",
    "GIT_CONFIG_VALUE_1": "main",
}

# A private index, so the user's staged changes stay as they are. Reading the previous
# tree first keeps files that are tracked although .gitignore matches them.
_RECORD_BASE = r"""
set -e
cd "$1"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || git init -q
git rev-parse -q --verify refs/tempi/base >/dev/null && exit 0
export GIT_INDEX_FILE="/tmp/tempi-base-index.$$"
trap 'rm -f "$GIT_INDEX_FILE"' EXIT
if head=$(git rev-parse -q --verify HEAD); then
  git read-tree "$head"
  set -- -p "$head"
else
  set --
fi
git add -A
commit=$(git commit-tree "$@" -m "tempi: workspace when the sandbox started" "$(git write-tree)")
git update-ref refs/tempi/base "$commit"
"""

# $2 = "binary" shows every changed file as binary, for content that is not UTF-8.
_DIFF = r"""
set -e
cd "$1"
export GIT_INDEX_FILE="/tmp/tempi-patch-index.$$"
attributes="/tmp/tempi-patch-attributes.$$"
trap 'rm -f "$GIT_INDEX_FILE" "$attributes"' EXIT
git read-tree refs/tempi/base
git add -A
if [ "$2" = binary ]; then
  echo '* -diff' > "$attributes"
  set -- -c "core.attributesFile=$attributes"
else
  set --
fi
git "$@" diff --cached --binary --no-color --no-ext-diff refs/tempi/base
"""


async def record_workspace_base(backend: DockerBackend, workspace: str = WORKSPACE_DIR) -> None:
    """Commit the workspace's current content as the base of later patches, once."""
    result = await backend.run(["sh", "-c", _RECORD_BASE, "tempi-base", workspace], env=_GIT_ENV)
    if result.exit_code != 0:
        detail = result.stderr.decode("utf-8", errors="replace").strip()
        raise SandboxError(f"Cannot record the starting state of {workspace}: {detail}")


async def workspace_patch(backend: DockerBackend, workspace: str = WORKSPACE_DIR) -> str:
    """A `git apply` patch of every change in the workspace since the sandbox started
    ("" when nothing changed)."""
    for mode in ("text", "binary"):
        result = await backend.run(["sh", "-c", _DIFF, "tempi-patch", workspace, mode], env=_GIT_ENV)
        if result.exit_code != 0:
            detail = result.stderr.decode("utf-8", errors="replace").strip()
            raise SandboxError(f"Cannot compute the changes in {workspace}: {detail}")
        try:
            return result.stdout.decode("utf-8")
        except UnicodeDecodeError:
            continue  # some changed file is not UTF-8 text: send everything as binary
    raise SandboxError(f"The patch of {workspace} is not plain text")
