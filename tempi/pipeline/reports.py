"""A finished pipeline for CI: the exit code, a JSON summary, JUnit XML (one testcase per
shard, a failed verify's tail in `<failure>`) and a Markdown summary for
$GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from tempi.pipeline.run_types import PipelineProgress, ShardStatus

EXIT_OK = 0
EXIT_SHARDS_FAILED = 1
EXIT_FINAL_VERIFY = 5
EXIT_BUDGET = 6
EXIT_CANCELLED = 7


def exit_code(progress: PipelineProgress) -> int:
    if progress.cancelled:
        return EXIT_CANCELLED
    if progress.stopped_by:
        return EXIT_BUDGET
    if progress.final_verify == "failed":
        return EXIT_FINAL_VERIFY
    # A shard an operator skipped is not a failure: it was left out on purpose.
    if any(s.state not in ("committed", "skipped") for s in progress.shards):
        return EXIT_SHARDS_FAILED
    return EXIT_OK


def shard_count(n: int) -> str:
    return f"{n} shard" if n == 1 else f"{n} shards"


def counts(progress: PipelineProgress) -> dict[str, int]:
    return dict(Counter(s.state for s in progress.shards))


def _stop_note(progress: PipelineProgress) -> str:
    if not progress.stopped_by:
        return ""
    left = sum(s.state != "committed" for s in progress.shards)
    if progress.stopped_by == "budget.max_cost_usd":
        how = "with a larger budget.max_cost_usd (it counts every run of this pipeline)"
    else:
        how = "(budget.deadline counts from each run's start)"
    return (
        f"; stopped by {progress.stopped_by}: the same command run again {how} "
        f"goes on with the {shard_count(left)} left"
    )


def summary_line(progress: PipelineProgress) -> str:
    c = counts(progress)
    parts = [
        f"{c.get(state, 0)} {state}"
        for state in ("committed", "failed", "conflict", "skipped")
        if c.get(state)
    ]
    at_work = sum(c.get(state, 0) for state in ("running", "stepped", "verified"))
    if at_work:
        parts.append(f"{at_work} at work")
    if c.get("pending"):
        parts.append(f"{c['pending']} not started")
    resumed = sum(s.resumed for s in progress.shards)
    if resumed:
        parts.append(f"{resumed} from an earlier run")
    final = f"; final verify {progress.final_verify}" if progress.final_verify else ""
    cancelled = "; cancelled" if progress.cancelled else ""
    paused = "; paused (`tempi pipeline resume ID` starts shards again)" if progress.paused else ""
    return (
        f"{progress.name}: {shard_count(len(progress.shards))}: {', '.join(parts) or 'none'}{final}{cancelled}"
        f"{paused}"
        f"{_stop_note(progress)}; "
        f"branch {progress.branch}; cost ${progress.cost_usd():.4f}"
    )


def json_summary(progress: PipelineProgress) -> dict[str, Any]:
    return {
        "pipeline": progress.pipeline_id,
        "name": progress.name,
        "branch": progress.branch,
        "base": progress.base_commit,
        "exit_code": exit_code(progress),
        "counts": counts(progress),
        "cost_usd": progress.cost_usd(),
        "final_verify": progress.final_verify,
        "cancelled": progress.cancelled,
        "stopped_by": progress.stopped_by,
        "paused": progress.paused,
        "runs": progress.runs,
        "shards": [
            {
                "index": s.shard.index,
                "id": s.shard.id,
                "files": s.shard.files,
                "state": s.state,
                "reason": s.reason,
                "repairs": s.repairs,
                "turns": s.turns,
                "commit": s.commit,
                "resumed": s.resumed,
                "rerun": s.rerun,
                "retries": s.retries,
                "session_file": s.session_file,
                "verify_tail": s.verify_tail,
            }
            for s in progress.shards
        ],
    }


def _testcase(suite: ET.Element, status: ShardStatus) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=status.shard.directory or "pipeline", name=" ".join(status.shard.files)
    )
    if status.state == "skipped":
        ET.SubElement(case, "skipped", message=status.reason or "skipped")
    elif status.state != "committed":
        failure = ET.SubElement(case, "failure", message=status.reason or status.state, type=status.state)
        failure.text = status.verify_tail or status.reason or ""


def junit_xml(progress: PipelineProgress) -> str:
    skipped = sum(s.state == "skipped" for s in progress.shards)
    failures = sum(s.state != "committed" for s in progress.shards) - skipped
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=progress.name,
        tests=str(len(progress.shards)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for status in progress.shards:
        _testcase(suite, status)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def markdown(progress: PipelineProgress) -> str:
    lines = [f"## tempi pipeline {progress.name}", "", summary_line(progress), ""]
    lines += ["| # | files | state | repairs | note |", "|---|---|---|---|---|"]
    for s in progress.shards:
        note = (s.reason or "").replace("|", "\\|").replace("\n", " ")
        files = ", ".join(f"`{f}`" for f in s.shard.files)
        lines.append(f"| {s.shard.index} | {files} | {s.state} | {s.repairs} | {note} |")
    return "\n".join(lines) + "\n"


def write_reports(
    progress: PipelineProgress, *, json_path: str | None, junit: str | None, md: str | None
) -> None:
    for path, text in (
        (json_path, lambda: json.dumps(json_summary(progress), indent=2) + "\n"),
        (junit, lambda: junit_xml(progress)),
        (md, lambda: markdown(progress)),
    ):
        if path:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text())
