"""`tempi pipeline`: refactor a repository shard by shard from a spec file.

Parsing, the schema and `run --dry-run` live here; a real run is `pipeline_run.py`, the
commands on a pipeline by id `pipeline_manage.py`."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from pathlib import Path

from temporalio.service import RPCError

from tempi.agent.model_selection import ModelSelectionError
from tempi.cli.pipeline_run import key_configured, lost_server_line, model_choice, run_pipeline
from tempi.config.errors import ConfigError
from tempi.config.paths import tempi_home
from tempi.extensions.discovery import discover_extensions
from tempi.extensions.loader import check_extensions
from tempi.pipeline.loading import SpecError, load_spec
from tempi.pipeline.plan import PipelinePlan, plan_pipeline
from tempi.pipeline.reports import EXIT_SERVER_LOST
from tempi.pipeline.spec import PipelineSpec, json_schema
from tempi.pipeline.targets import Discovery, TargetError, discover
from tempi.pipeline.values import format_duration
from tempi.workers.temporal_client import TemporalUnreachable, server_gone

EXIT_USAGE = 2  # a spec or usage error
EXIT_CONFIG = 3  # a configuration error (no model, a broken models.json)
EXIT_INTERRUPTED = 130  # Ctrl-C: this command stopped following; the pipeline goes on

DESCRIPTION = """\
Run one coding-agent task over many files of a repository, shard by shard, from a spec
file (YAML). Each shard is a durable coding session in its own git worktree at the spec's
base commit; its steps run in order, then the verify command, with repair prompts on a
failure; each verified shard becomes one commit on the output branch (trailers
Tempi-Pipeline and Tempi-Shard). The pipeline's id comes from the spec's name, the spec
and the base commit, so the same command run again follows the same run, and a new run
(`--fresh`, or after the server lost its state) skips the shards the branch already has.
"""

EXAMPLES = """\
examples:
  tempi pipeline schema > pipeline.schema.json          the spec's JSON Schema (for editors)
  tempi pipeline run examples/pipeline/migrate-old-api.yaml --dry-run
                                                        the base commit, id, shards and first prompts
  tempi pipeline run spec.yaml --junit out/junit.xml    run it (or follow it again), with a JUnit report
  tempi pipeline list; tempi pipeline status ID         the pipelines on the server; one's shards
  tempi pipeline clean                                  remove the worktrees failed shards left
  tempi pipeline pause ID; tempi pipeline resume ID     hold new shards back; let them start again
  tempi pipeline retry ID SHARD; skip ID SHARD          run a failed shard again; leave a pending one out
  tempi pipeline concurrency ID 8                       more (or fewer) shards at once

exit codes: 0 all shards committed or skipped (and the final verify passed); 1 some shards failed, the
rest committed; 2 spec or usage error; 3 configuration error (no key, Temporal unreachable,
the spec's setup failed); 4 the server went away (run the same command again); 5 the final verify failed; 6 a budget or the deadline stopped it (the same command goes on);
7 cancelled
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tempi pipeline",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run a pipeline from its spec, or follow the run it already has",
        description="Run the pipeline SPEC describes. If this spec on this base commit ran before, "
        "follow that run instead (a finished one: its result, with no model request).",
        epilog="exit codes: 0 all committed; 1 some shards failed; 2 spec or usage error; "
        "3 configuration error or setup failed; 4 server lost; 5 final verify failed; 6 budget or deadline reached (run it again "
        "to go on); 7 cancelled",
    )
    run.add_argument("spec", metavar="SPEC.yaml", help="the pipeline spec (see `tempi pipeline schema`)")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the base commit, the pipeline id and the shards with their first prompt; "
        "no model request, no change to the repository",
    )
    run.add_argument("--detach", action="store_true", help="start it and exit; `wait ID` follows it")
    run.add_argument(
        "--fresh",
        action="store_true",
        help="a new run instead of following the last one; shards already committed on the "
        "output branch are still skipped",
    )
    run.add_argument(
        "--concurrency", type=_positive, metavar="N", help="shards at work at once (overrides the spec)"
    )
    run.add_argument("--json", metavar="FILE", help="write the JSON summary here (also report.json)")
    run.add_argument("--junit", metavar="FILE", help="write JUnit XML here (also report.junit)")
    run.add_argument(
        "--markdown",
        metavar="FILE",
        help="write the Markdown summary here (also report.markdown), e.g. $GITHUB_STEP_SUMMARY",
    )
    run.add_argument(
        "--mode",
        choices=["text", "json"],
        default="text",
        help="text: readable lines; json: with --dry-run the plan, else one JSON line per shard "
        "state change and the summary",
    )
    sub.add_parser("schema", help="print the spec's JSON Schema")
    for name, what in (
        ("status", "a pipeline's shards and their states"),
        ("attach", "follow a pipeline's progress until it ends"),
        ("wait", "follow a pipeline's progress until it ends"),
        ("cancel", "cancel a pipeline: no new shard starts, the running ones stop, commits stay"),
    ):
        cmd = sub.add_parser(name, help=what, description=f"{what}.")
        cmd.add_argument("pipeline", metavar="ID", help="a pipeline's workflow id (`tempi pipeline list`)")
    sub.add_parser("list", help="the pipelines on this server, newest first")
    sub.add_parser(
        "clean",
        help="remove the worktrees pipelines left (failed shards') except a running one's",
        description="remove the git worktrees finished pipelines left behind: a failed shard's "
        "(kept for a look at what it did) and a stopped run's output checkout. A running "
        "pipeline's stay; session files stay.",
    )
    for name, what in (
        ("pause", "pause a pipeline: no new shard starts, the running ones finish"),
        ("resume", "resume a paused pipeline"),
    ):
        cmd = sub.add_parser(name, help=what, description=f"{what}.")
        cmd.add_argument("pipeline", metavar="ID", help="a pipeline's workflow id (`tempi pipeline list`)")
    for name, what in (
        ("retry", "run a failed or conflict shard again while the pipeline runs"),
        ("skip", "leave a pending shard out (reported as skipped, not as a failure)"),
    ):
        cmd = sub.add_parser(name, help=what, description=f"{what}.")
        cmd.add_argument("pipeline", metavar="ID", help="a pipeline's workflow id (`tempi pipeline list`)")
        cmd.add_argument(
            "shard", metavar="SHARD", help="the shard's id, number or file (`tempi pipeline status ID`)"
        )
    cmd = sub.add_parser(
        "concurrency",
        help="change how many shards are at work at once",
        description="change how many shards of a running pipeline are at work at once.",
    )
    cmd.add_argument("pipeline", metavar="ID", help="a pipeline's workflow id (`tempi pipeline list`)")
    cmd.add_argument("n", metavar="N", type=_positive, help="shards at once, e.g. 8")
    return p


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: give a positive whole number, e.g. 4")
    return n


def cmd_pipeline(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "schema":
        print(json.dumps(json_schema(), indent=2))
        return 0
    if args.command == "run":
        args.argv = argv  # said back to the user as the command that goes on
        return _run(args)
    from tempi.cli.pipeline_manage import manage

    try:
        arg = getattr(args, "shard", None) or getattr(args, "n", None)
        return asyncio.run(
            manage(args.command, getattr(args, "pipeline", None), None if arg is None else str(arg))
        )
    except TemporalUnreachable as err:
        print(f"tempi pipeline: {err}", file=sys.stderr)
        return EXIT_CONFIG


def _run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(Path(args.spec))
    except SpecError as err:
        for problem in err.problems:
            print(f"tempi pipeline: {problem}", file=sys.stderr)
        return EXIT_USAGE
    cwd = Path.cwd()
    try:
        discovery = discover(spec, cwd)
    except TargetError as err:
        print(f"tempi pipeline: {args.spec}: {err}", file=sys.stderr)
        return EXIT_USAGE
    broken = check_extensions(discover_extensions(Path(discovery.root), spec.extensions))
    if broken:
        # Every shard would run without the extension (or with its tools blocked): stop first.
        for failure in broken:
            print(
                f"tempi pipeline: {args.spec}: extension {failure.extension}: {failure.error}",
                file=sys.stderr,
            )
        return EXIT_USAGE
    try:
        model = _model_line(spec, Path(discovery.root))
    except ModelSelectionError as err:
        print(f"tempi pipeline: {args.spec}: model: {err}", file=sys.stderr)
        return EXIT_USAGE if spec.model else EXIT_CONFIG
    except ConfigError as err:
        print(f"tempi pipeline: {err}", file=sys.stderr)
        return EXIT_CONFIG
    if not args.dry_run:
        if not key_configured(spec, Path(discovery.root)):
            print(
                f"tempi pipeline: {args.spec}: no API key for the model ({model}); set the provider's "
                f"key variable or name one in {tempi_home() / 'models.json'}, then run this again",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        return _real_run(spec, discovery, args)
    plan = plan_pipeline(spec, discovery, args.concurrency)
    if args.mode == "json":
        print(json.dumps({"model": model, **plan.model_dump(mode="json")}, indent=2))
    else:
        _print_plan(spec, plan, model, args.spec)
    return 0


def _real_run(spec: PipelineSpec, discovery: Discovery, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(
            run_pipeline(
                spec,
                discovery,
                fresh=args.fresh,
                detach=args.detach,
                concurrency=args.concurrency,
                json_path=args.json,
                junit=args.junit,
                markdown=args.markdown,
                json_mode=args.mode == "json",
            )
        )
    except TemporalUnreachable as err:
        print(f"tempi pipeline: {err}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except RPCError as err:
        if not server_gone(err):
            raise
        print(lost_server_line(err, "tempi pipeline " + shlex.join(args.argv)), file=sys.stderr)
        return EXIT_SERVER_LOST


def _model_line(spec: PipelineSpec, root: Path) -> str:
    """The model a shard would use, chosen as `tempi --model` chooses it."""
    model, level = model_choice(spec, root)
    return f"{model.provider}/{model.id}, thinking {level}"


def _print_plan(spec: PipelineSpec, plan: PipelinePlan, model: str, spec_path: str) -> None:
    d = plan.discovery
    t = spec.targets
    source = (
        f"command {t.command!r}"
        if t.command is not None
        else "glob " + ", ".join(t.globs) + (f" excluding {', '.join(t.exclude)}" if t.exclude else "")
    )
    size = t.shard_size
    grouping = f"by {t.group_by}" + (
        f", at most {size} per shard" if size else ", a whole directory per shard"
    )
    lines = [
        f"tempi pipeline: dry run of {spec.name} ({spec_path})",
        f"pipeline id  {plan.pipeline_id}",
        f"repository   {d.root}",
        f"base         {d.base} = {d.base_commit}",
        f"model        {model}",
        f"sandbox      {spec.sandbox}",
    ]
    if spec.setup:
        lines.append(f"setup        {'; '.join(spec.setup)}")
    lines += [
        f"targets      {len(d.targets)} ({source})",
        f"shards       {len(plan.shards)} ({grouping}), {plan.concurrency} at a time",
        "steps        "
        + ", ".join(s.name + (f" (max {s.max_turns} turns)" if s.max_turns else "") for s in spec.steps),
    ]
    if spec.verify is not None:
        repairs = spec.verify.repair.attempts if spec.verify.repair else 0
        lines.append(
            f"verify       {spec.verify.command} (timeout {format_duration(spec.verify.timeout)}, "
            f"{repairs} repair{'s' if repairs != 1 else ''})"
        )
    final = spec.final.verify or "none"
    lines.append(f"final        verify {final}, commits {spec.final.commits}")
    budget = spec.budget
    limits = [
        f"max ${budget.max_cost_usd:g}" if budget.max_cost_usd is not None else "",
        f"{budget.max_turns_per_shard} turns a shard" if budget.max_turns_per_shard is not None else "",
        f"deadline {format_duration(budget.deadline)}" if budget.deadline is not None else "",
    ]
    lines.append(f"budget       {', '.join(limit for limit in limits if limit) or 'none'}")
    if spec.context.strip():
        context = spec.context.strip().splitlines()
        lines.append(f"context      {context[0]}")
        lines += [f"             {line}" for line in context[1:]]
    lines.append(
        f"output       branch {plan.branch}" + (f", patch {spec.output.patch}" if spec.output.patch else "")
    )
    count = len(plan.shards)
    for planned in plan.shards:
        shard = planned.shard
        lines.append(f"shard {shard.index}/{count} {shard.id}: {' '.join(shard.files)}")
        prompt = planned.first_prompt.splitlines() or [""]
        lines.append(f"  {spec.steps[0].name}: {prompt[0]}")
        lines += [f"    {line}" for line in prompt[1:]]
    if not plan.shards:
        lines.append("no targets: nothing would run; check targets in the spec")
    lines.append("dry run: no model was asked and nothing in the repository changed")
    print("\n".join(lines))
