"""The durable peers' own virtual environments, made with uv and kept between runs.

Each peer is installed at pinned versions in a venv of its own (never in tempi's: neither is
a dependency of tempi), on the interpreter running the bench so that every contender runs on
the same Python. A venv is made again when its pins or that interpreter change. Where they
live: $TEMPI_BENCH_PEERS_DIR, else $XDG_CACHE_HOME/tempi-bench/peers (~/.cache/...)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PEERS_DIR_ENV = "TEMPI_BENCH_PEERS_DIR"
STAMP = "tempi-bench-pins.json"


@dataclass(frozen=True)
class PeerSpec:
    name: str  # the venv's directory and the results' key
    label: str  # as the table shows it
    app: str  # the module of bench.peers its driver runs
    requirements: tuple[str, ...]  # pinned, as uv pip install takes them
    shown: tuple[str, ...]  # the distributions whose versions the results report


PEERS: tuple[PeerSpec, ...] = (
    PeerSpec(
        name="openai-agents",
        label="Temporal OpenAI Agents",
        app="openai_agents_app",
        # temporalio's openai-agents extra is this standalone package, which bounds openai-agents.
        requirements=(
            "temporalio==1.35.0",
            "temporalio-openai-agents==1.1.0",
            "openai-agents==0.22.3",
            "openai==3.57.0",
        ),
        shown=("temporalio", "temporalio-openai-agents", "openai-agents", "openai"),
    ),
    PeerSpec(
        name="pydantic-ai",
        label="pydantic-ai TemporalAgent",
        app="pydantic_ai_app",
        # The slim distribution with the two extras used: the same code as `pydantic-ai`
        # without every other provider's SDK.
        requirements=("pydantic-ai-slim[openai,temporal]==2.68.0", "temporalio==1.35.0", "openai==3.57.0"),
        shown=("pydantic-ai-slim", "temporalio", "openai"),
    ),
)


def peers_root() -> Path:
    if os.environ.get(PEERS_DIR_ENV):
        return Path(os.environ[PEERS_DIR_ENV]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "tempi-bench" / "peers"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _wanted(spec: PeerSpec, python: str) -> dict[str, object]:
    return {"requirements": list(spec.requirements), "python": os.path.realpath(python)}


def ensure_env(spec: PeerSpec, root: Path, python: str = sys.executable) -> Path:
    """The peer's venv interpreter, made (or made again) unless the cached one matches."""
    venv = root / spec.name
    stamp = venv / STAMP
    wanted = _wanted(spec, python)
    if venv_python(venv).exists() and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return venv_python(venv)
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError(
            "`python -m bench peers` installs each peer with uv, which is not on PATH: "
            "install it (`pip install uv`) and run again"
        )
    print(f"  installing {spec.label} into {venv} ...", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([uv, "venv", "--quiet", "--clear", "--python", python, str(venv)], check=True)
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(venv_python(venv)), *spec.requirements], check=True
    )
    stamp.write_text(json.dumps(wanted))
    return venv_python(venv)


def installed_versions(python: Path, distributions: tuple[str, ...]) -> dict[str, str]:
    """The versions the peer's venv really holds, read by its own interpreter."""
    code = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))"
    )
    out = subprocess.run(
        [str(python), "-c", code, *distributions], capture_output=True, text=True, check=True
    )
    versions: dict[str, str] = json.loads(out.stdout)
    return versions
