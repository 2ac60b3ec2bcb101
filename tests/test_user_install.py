"""A user who runs the README's first command gets tempi without the development tools.

The README's command prefix (everything before `tempi` on its first line) is run as written
in a fresh copy of the project, with `tempi --version`; the copy's new environment must
hold tempi and no pytest, ruff or mypy. uv takes the locked packages from its cache (the
test run itself was synced from the same lock), so this costs seconds, not downloads.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEV_TOOLS = ("pytest", "ruff", "mypy")


def _readme_tempi_prefix() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, re.DOTALL)
    assert block, "the README has no bash block"
    first = block.group(1).splitlines()[0]
    words = shlex.split(first, comments=True)
    assert "tempi" in words, f"the README's first command does not run tempi: {first}"
    return words[: words.index("tempi")]


def test_the_readmes_first_command_installs_no_dev_tools(tmp_path: Path) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    prefix = _readme_tempi_prefix()
    assert prefix[:2] == ["uv", "run"], prefix
    copy = tmp_path / "tempi"
    copy.mkdir()
    for name in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copy2(ROOT / name, copy / name)
    shutil.copytree(ROOT / "tempi", copy / "tempi", ignore=shutil.ignore_patterns("__pycache__"))
    # Outside this test run's own environment: `uv run` sets these for its children.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_RUN_RECURSION_DEPTH")
    }
    done = subprocess.run(
        [uv, *prefix[1:], "tempi", "--version"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tempi "), done.stdout
    installed = sorted(p.name for p in (copy / ".venv" / "bin").iterdir())
    assert "tempi" in installed
    assert not [tool for tool in DEV_TOOLS if tool in installed], (
        f"`{' '.join(prefix)} tempi` installed development tools: {installed}"
    )
