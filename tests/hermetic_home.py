"""Keeps the test run away from the real user's files.

Imported first by conftest.py, before any tempi module reads the environment: the run gets
a HOME, TEMPI_HOME and PI_CODING_AGENT_DIR of its own (each test then gets fresh ones, see
conftest.py), so nothing reads the user's `~/.pi/agent` or writes their `~/.tempi`. Package
caches stay the user's, so `uv` and `npm` do not download everything again.

An audit hook notes every file opened or directory listed under the real home's `.tempi`
and `.pi`; a test that touches one fails (conftest.py's `_never_the_real_home`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

REAL_HOME = Path(os.path.expanduser("~")).resolve()
_GUARDED = tuple(str(REAL_HOME / name) for name in (".tempi", ".pi"))
_GUARDED_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
touched: list[str] = []
ROOT: Path | None = None  # this process's own folder, once isolate() has made it


def _keep_user_caches() -> None:
    """Caches that are not configuration: the fresh HOME would make them empty."""
    xdg_cache = Path(os.environ.get("XDG_CACHE_HOME") or REAL_HOME / ".cache")
    # Every `tempi` the tests start imports the same modules; with PYTHONDONTWRITEBYTECODE
    # (set on some machines) each compiled them all from source again. They share a
    # bytecode cache instead, kept apart from the checkout, as an installed tempi has one.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(xdg_cache / "tempi-tests" / "bytecode"))
    defaults = {
        "UV_CACHE_DIR": xdg_cache / "uv",
        "UV_PYTHON_INSTALL_DIR": REAL_HOME / ".local" / "share" / "uv" / "python",
        "npm_config_cache": REAL_HOME / ".npm",
        "PIP_CACHE_DIR": xdg_cache / "pip",
    }
    for name, path in defaults.items():
        if name not in os.environ and path.exists():
            os.environ[name] = str(path)


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event not in _GUARDED_EVENTS or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    if path.startswith(_GUARDED) and any(path == p or path.startswith(p + "/") for p in _GUARDED):
        touched.append(path)


def isolate() -> Path:
    """Point HOME, TEMPI_HOME and PI_CODING_AGENT_DIR at a fresh folder for this process."""
    global ROOT
    _keep_user_caches()
    root = ROOT = Path(tempfile.mkdtemp(prefix="tempi-tests-"))
    os.environ["HOME"] = str(root / "home")
    os.environ["TEMPI_HOME"] = str(root / "home" / ".tempi")
    os.environ["PI_CODING_AGENT_DIR"] = str(root / "home" / ".pi" / "agent")
    (root / "home").mkdir()
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    sys.addaudithook(_audit)
    return root
