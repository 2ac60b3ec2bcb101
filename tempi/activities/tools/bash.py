"""bash: run a command line, stream its output, keep the tail, spill the rest (up to a cap)."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tempi.activities.tools.backend import ExecResult
from tempi.activities.tools.bash_output import SPILL_MAX_ENV, OutputAccumulator
from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.agent.events import ToolOutput
from tempi.agent.messages import TextContent
from tempi.agent.tool_specs import ToolOutcome
from tempi.agent.truncation import TruncationResult, format_size

UPDATE_INTERVAL_SECONDS = 0.1


def _where_the_rest_is(output: OutputAccumulator) -> str:
    reason = output.unsaved_reason()
    if reason is not None:
        return f"The full output could not be saved: {reason}"
    if output.spill_cut:
        return (
            f"Output saved to {output.spill_path} only up to {format_size(output.max_spill_bytes)} "
            f"({SPILL_MAX_ENV})"
        )
    return f"Full output: {output.spill_path}"


def _truncation_notice(truncation: TruncationResult, output: OutputAccumulator) -> str:
    first = truncation.total_lines - truncation.output_lines + 1
    last = truncation.total_lines
    rest = _where_the_rest_is(output)
    if truncation.last_line_partial:
        return (
            f"[Last {format_size(truncation.output_bytes)} of line {last} shown "
            f"(the line is {format_size(output.last_line_bytes)}). {rest}]"
        )
    limit = "" if truncation.truncated_by == "lines" else f" ({format_size(truncation.max_bytes)} limit)"
    return f"[Lines {first}-{last} of {truncation.total_lines} shown{limit}. {rest}]"


def _details(truncation: TruncationResult, output: OutputAccumulator) -> dict[str, Any]:
    details: dict[str, Any] = {"truncation": truncation.to_json_dict()}
    if output.spilled:
        details["fullOutputPath"] = output.spill_path
        if output.spill_cut:
            details["fullOutputCut"] = True
    reason = output.unsaved_reason()
    if reason is not None:
        details["fullOutputUnsaved"] = reason
    return details


def _render(output: OutputAccumulator) -> tuple[str, dict[str, Any] | None]:
    truncation = output.finish()
    if not truncation.truncated:
        return truncation.content, None
    notice = _truncation_notice(truncation, output)
    return f"{truncation.content}\n\n{notice}", _details(truncation, output)


def _with_status(text: str, status: str) -> str:
    return f"{text}\n\n{status}" if text else status


def _partial_result(output: OutputAccumulator) -> ToolOutput:
    truncation = output.snapshot()
    # pi's partial results carry an object, empty until the output is truncated.
    details = _details(truncation, output) if truncation.truncated else {}
    return ToolOutput(content=[TextContent(text=truncation.content)], details=details)


async def _publish_updates(
    on_update: Callable[[ToolOutput], None], output: OutputAccumulator, dirty: asyncio.Event
) -> None:
    """Send the output so far whenever there is new output, at most every 100 ms."""
    while True:
        await dirty.wait()
        dirty.clear()
        on_update(_partial_result(output))
        await asyncio.sleep(UPDATE_INTERVAL_SECONDS)


@dataclass
class CommandRun:
    result: ExecResult
    text: str
    details: dict[str, Any] | None


async def run_command(command: str, ctx: ToolContext, timeout: float | None = None) -> CommandRun:
    """Run one command line with streamed, tail-truncated, spilled output."""
    backend = ctx.backend
    cwd_info = await backend.stat(ctx.cwd)
    if cwd_info is None or cwd_info.kind != "dir":
        raise ToolError(f"The working directory {ctx.cwd} does not exist, so the command cannot run")

    spill_dir = ctx.spill_dir or tempfile.gettempdir()
    os.makedirs(spill_dir, exist_ok=True)
    if os.path.islink(spill_dir):
        raise ToolError(
            f"The output folder {spill_dir} is a link; tempi does not write command output through it"
        )
    output = OutputAccumulator(os.path.join(spill_dir, f"tempi-bash-{secrets.token_hex(8)}.log"))
    dirty = asyncio.Event()
    publisher: asyncio.Task[None] | None = None
    if ctx.on_update is not None:
        ctx.on_update(ToolOutput(content=[]))
        publisher = asyncio.create_task(_publish_updates(ctx.on_update, output, dirty))

    def on_output(chunk: bytes) -> None:
        output.append(chunk)
        dirty.set()

    try:
        result = await backend.exec(
            backend.shell_argv(command), cwd=ctx.cwd, on_output=on_output, timeout=timeout, abort=ctx.abort
        )
    finally:
        output.close()
        if publisher is not None:
            publisher.cancel()  # it only ever waits between updates, so none is half-sent

    if ctx.on_update is not None and dirty.is_set():
        ctx.on_update(_partial_result(output))
    text, details = _render(output)
    return CommandRun(result=result, text=text, details=details)


async def run_bash(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    timeout_arg = args.get("timeout")
    timeout = float(timeout_arg) if timeout_arg is not None and timeout_arg > 0 else None
    command = args["command"]
    run = await run_command(
        f"{ctx.command_prefix}\n{command}" if ctx.command_prefix else command, ctx, timeout
    )
    result, text, details = run.result, run.text, run.details
    if result.aborted:
        return text_outcome(_with_status(text, "Command aborted"), details, is_error=True)
    if result.timed_out:
        return text_outcome(
            _with_status(text, f"Command timed out after {timeout_arg} seconds"), details, True
        )
    if result.exit_code is not None and result.exit_code < 0:
        status = f"Command was killed by signal {-result.exit_code}"
        return text_outcome(_with_status(text, status), details, is_error=True)
    if result.exit_code != 0:
        return text_outcome(_with_status(text, f"Command exited with code {result.exit_code}"), details, True)
    return text_outcome(text or "(no output)", details)
