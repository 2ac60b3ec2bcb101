"""A small repository for the pipeline tests: six modules under src/ on `main`, a vendored
file, a feature branch with a seventh module, and an uncommitted draft."""

from __future__ import annotations

import subprocess
from pathlib import Path

MODULES = [
    "src/app/billing.py",
    "src/app/orders.py",
    "src/app/users.py",
    "src/lib/cache.py",
    "src/lib/http.py",
    "src/main.py",
]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for i, module in enumerate(MODULES):
        path = root / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"from old_api import call\n\n\ndef f{i}():\n    return call({i})\n")
    (root / "src/vendor").mkdir()
    (root / "src/vendor/six.py").write_text("from old_api import call\n")
    (root / "tests").mkdir()
    (root / "tests/test_main.py").write_text("def test_ok():\n    assert True\n")
    (root / "README.md").write_text("fixture\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "six modules")
    git(root, "checkout", "-q", "-b", "feature")
    (root / "src/app/later.py").write_text("from old_api import call\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a seventh module, not on main")
    (root / "src/app/draft.py").write_text("from old_api import call\n")  # never committed
    return root
