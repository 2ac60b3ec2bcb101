"""A finished pipeline for CI: the exit code, a JSON summary, JUnit XML (one testcase per
shard, a failed verify's tail in `<failure>`) and a Markdown summary for
$GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from tempi.pipeline.run_types import PipelineProgress, ShardStatus

EXIT_OK = 0
EXIT_SHARDS_FAILED = 1
# The spec's setup failed, so no shard started: the environment needs fixing, not the shards.
EXIT_SETUP_FAILED = 3
EXIT_FINAL_VERIFY = 5
EXIT_BUDGET = 6
EXIT_CANCELLED = 7
# The Temporal server went away while the command followed the run; the pipeline itself is
# kept, and the same command run again goes on with it (not "some shards failed").
EXIT_SERVER_LOST = 4

# Colour and cursor sequences that verify commands print, and the characters XML 1.0 forbids:
# either would make the JUnit file unreadable to a CI system.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def plain_text(text: str) -> str:
    """`text` without terminal escape sequences and without characters XML 1.0 cannot hold."""
    return _NOT_XML.sub("", _ANSI.sub("", text))


def _plain_or_none(text: str | None) -> str | None:
    return None if text is None else plain_text(text)


def exit_code(progress: PipelineProgress) -> int:
    if progress.cancelled:
        return EXIT_CANCELLED
    if progress.setup_failure is not None:
        return EXIT_SETUP_FAILED
    if progress.stopped_by:
        return EXIT_BUDGET
    if progress.final_verify == "failed":
        return EXIT_FINAL_VERIFY
    # A shard an operator skipped is not a failure: it was left out on purpose.
    if any(s.state not in ("committed", "skipped") for s in progress.shards):
        return EXIT_SHARDS_FAILED
    return EXIT_OK


_OUTCOMES = {
    EXIT_OK: "done",
    EXIT_SHARDS_FAILED: "some shards failed",
    EXIT_SETUP_FAILED: "setup failed",
    EXIT_FINAL_VERIFY: "final verify failed",
    EXIT_BUDGET: "stopped by its budget",
    EXIT_CANCELLED: "cancelled",
}


def outcome_line(progress: PipelineProgress) -> str:
    """A finished pipeline in a few words, as `tempi pipeline list` shows it."""
    code = exit_code(progress)
    c = counts(progress)
    parts = ", ".join(f"{c[state]} {state}" for state in sorted(c, key=lambda s: -c[s]))
    return f"{_OUTCOMES.get(code, 'finished')} (exit {code}): {parts}"


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
    if progress.setup_failure is not None:
        final = "; setup failed, so no shard started"
    cancelled = "; cancelled" if progress.cancelled else ""
    paused = "; paused (`tempi pipeline resume ID` starts shards again)" if progress.paused else ""
    if progress.waiting_for_checkout:
        paused += "; the next shard waits for a checkout until integration commits a shard"
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
        "final_verify_tail": _plain_or_none(progress.final_verify_tail),
        "setup_failure": None
        if progress.setup_failure is None
        else {
            "command": progress.setup_failure.command,
            "exit_code": progress.setup_failure.exit_code,
            "tail": plain_text(progress.setup_failure.tail),
        },
        "cancelled": progress.cancelled,
        "stopped_by": progress.stopped_by,
        "paused": progress.paused,
        "waiting_for_checkout": progress.waiting_for_checkout,
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
                "verify_tail": _plain_or_none(s.verify_tail),
            }
            for s in progress.shards
        ],
    }


def _testcase(suite: ET.Element, status: ShardStatus) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=status.shard.directory or "pipeline", name=" ".join(status.shard.files)
    )
    if status.state == "skipped":
        ET.SubElement(case, "skipped", message=plain_text(status.reason or "skipped"))
    elif status.state != "committed":
        failure = ET.SubElement(
            case, "failure", message=plain_text(status.reason or status.state), type=status.state
        )
        failure.text = plain_text(status.verify_tail or status.reason or "")


def _final_verify_case(suite: ET.Element, progress: PipelineProgress) -> bool:
    """The final verify as a testcase of its own (True when it failed): a red CI run then
    points at it, with its output, instead of reporting no failure at all."""
    if progress.final_verify is None:
        return False
    case = ET.SubElement(suite, "testcase", classname="pipeline", name="final verify")
    if progress.final_verify == "skipped":
        ET.SubElement(case, "skipped", message="final verify skipped")
        return False
    if progress.final_verify == "failed":
        failure = ET.SubElement(case, "failure", message="final verify failed", type="final-verify")
        failure.text = plain_text(progress.final_verify_tail or "")
        return True
    return False


def _setup_case(suite: ET.Element, progress: PipelineProgress) -> bool:
    failed = progress.setup_failure
    if failed is None:
        return False
    case = ET.SubElement(suite, "testcase", classname="pipeline", name="setup")
    failure = ET.SubElement(case, "failure", message=plain_text(_setup_said(progress)), type="setup")
    failure.text = plain_text(failed.tail)
    return True


def junit_xml(progress: PipelineProgress) -> str:
    skipped = sum(s.state == "skipped" for s in progress.shards) + (progress.final_verify == "skipped")
    failures = sum(s.state not in ("committed", "skipped") for s in progress.shards)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name=plain_text(progress.name))
    failures += _setup_case(suite, progress)
    for status in progress.shards:
        _testcase(suite, status)
    failures += _final_verify_case(suite, progress)
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def final_verify_report(progress: PipelineProgress) -> str:
    """What a failed final verify printed (its tail), for the terminal and the summaries."""
    if progress.final_verify != "failed":
        return ""
    tail = plain_text(progress.final_verify_tail or "").rstrip() or "(it printed nothing)"
    return f"final verify failed; the end of its output:\n{tail}\n"


def _setup_said(progress: PipelineProgress) -> str:
    failed = progress.setup_failure
    assert failed is not None
    code = "timed out" if failed.exit_code is None else f"exit {failed.exit_code}"
    return f"setup failed ({code}): {failed.command}"


def setup_report(progress: PipelineProgress) -> str:
    """A failed setup's command and the end of its output, for the terminal and the summaries."""
    if progress.setup_failure is None:
        return ""
    tail = plain_text(progress.setup_failure.tail).rstrip() or "(it printed nothing)"
    return (
        f"{_setup_said(progress)}; no shard started, no model was asked. "
        "Setup runs in a clean checkout of the base commit; the end of its output:\n"
        f"{tail}\n"
    )


def _md_text(text: str) -> str:
    """Text for a Markdown table cell: HTML a step summary would render (a `<module>` in a
    reason) shown as written, one line, pipes kept out of the table's columns."""
    escaped = plain_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("|", "\\|").replace("\n", " ")


def _md_code_block(text: str) -> list[str]:
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text, fence]


def markdown(progress: PipelineProgress) -> str:
    lines = [f"## tempi pipeline {_md_text(progress.name)}", "", _md_text(summary_line(progress)), ""]
    lines += ["| # | files | state | repairs | note |", "|---|---|---|---|---|"]
    for s in progress.shards:
        files = ", ".join(f"`{f}`" for f in s.shard.files)
        lines.append(f"| {s.shard.index} | {files} | {s.state} | {s.repairs} | {_md_text(s.reason or '')} |")
    if progress.setup_failure is not None:
        tail = plain_text(progress.setup_failure.tail).rstrip() or "(it printed nothing)"
        lines += ["", f"### {_md_text(_setup_said(progress)).capitalize()}", "", *_md_code_block(tail)]
    if progress.final_verify == "failed":
        tail = plain_text(progress.final_verify_tail or "").rstrip() or "(it printed nothing)"
        lines += ["", "### Final verify failed", "", *_md_code_block(tail)]
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
