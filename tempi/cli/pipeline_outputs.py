"""What a finished pipeline writes for its caller: the reports (JSON, JUnit, Markdown) and
`output.patch`. `run` records where they go in the pipeline's state directory, so `wait`
and `attach` after `run --detach` (or a Ctrl-C) write the same files when the run ends."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pydantic import BaseModel

from tempi.config.paths import tempi_home
from tempi.pipeline.reports import write_reports
from tempi.pipeline.run_types import PipelineProgress

TARGETS_FILE = "outputs.json"


class PipelineOutputs(BaseModel):
    """Absolute paths (the spec's are relative to where `run` ran), None for none."""

    repo_root: str
    json_path: str | None = None
    junit: str | None = None
    markdown: str | None = None
    patch: str | None = None


def state_dir(pipeline_id: str) -> Path:
    return tempi_home() / "pipelines" / pipeline_id


def remember(pipeline_id: str, outputs: PipelineOutputs) -> None:
    path = state_dir(pipeline_id) / TARGETS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(outputs.model_dump_json())


def remembered(pipeline_id: str) -> PipelineOutputs | None:
    try:
        return PipelineOutputs.model_validate_json((state_dir(pipeline_id) / TARGETS_FILE).read_text())
    except (OSError, ValueError):
        return None


def absolute(path: str | None) -> str | None:
    return None if path is None else str(Path(path).resolve())


def write_outputs(progress: PipelineProgress, outputs: PipelineOutputs) -> None:
    if outputs.patch:
        write_patch(outputs.repo_root, progress.base_commit, progress.branch, outputs.patch)
    write_reports(progress, json_path=outputs.json_path, junit=outputs.junit, md=outputs.markdown)


def write_patch(root: str, base: str, branch: str, path: str) -> None:
    """The branch's change as a patch for the base. From where the branch left the base's
    history (`base...branch`), so a branch behind the base never turns into a patch that
    undoes the base's newer commits."""
    proc = subprocess.run(
        ["git", "-C", root, "diff", "--binary", f"{base}...{branch}"],
        capture_output=True,
        check=True,
        timeout=300,
    )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(proc.stdout)
