"""An answer's reads, run by the model call's activity as soon as the answer is written.

A turn whose tool calls only read (read, ls) would otherwise hand each call to a local
activity: about 4 ms of hand-overs through the SDK and a second activation of the workflow,
around a read of about 1.5 ms (README, "Where a round trip goes"). Run here, the results are
parked beside the session file under the ids the workflow chose for them, as the tool
activity parks its own, and reach the workflow with the answer. A retried attempt finds
them parked and does not read again; the workflow still decides whether they count (an
abort in between makes them "Aborted", as it would a tool activity's), and runs the calls as
tool calls when not all of them ran here."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from tempi.agent.messages import AssistantMessage, ToolCall
from tempi.agent.session_entries import iso_timestamp
from tempi.agent.tool_specs import EARLY_TOOLS
from tempi.workflows.activity_payloads import LlmCallInput, ToolCallInput, ToolCallResult

RunTool = Callable[[ToolCallInput], Awaitable[ToolCallResult]]


def early_calls(message: AssistantMessage, inp: LlmCallInput) -> list[ToolCall]:
    """The answer's tool calls when every one of them may run early (a read the session has)
    and there is an id for each; else none."""
    calls = message.tool_calls()
    # The workflow runs an answer's tool calls unless the answer failed (agent_loop.py).
    if message.stop_reason in ("error", "aborted") or not calls or len(calls) > len(inp.early_read_ids):
        return []
    if any(call.name not in EARLY_TOOLS or call.name not in inp.tools for call in calls):
        return []
    return calls


async def run_early(run_tool: RunTool, inp: LlmCallInput, message: AssistantMessage) -> list[ToolCallResult]:
    """Run the answer's early calls one after another, each result parked under its id with
    the one before as its parent (the answer's entry for the first)."""
    results: list[ToolCallResult] = []
    parent = inp.entry_id
    for call, entry_id in zip(early_calls(message, inp), inp.early_read_ids, strict=False):
        now_ms = int(time.time() * 1000)
        call_input = ToolCallInput(
            file=inp.file,
            tool_call=call,
            entry_id=entry_id,
            parent_id=parent,
            entry_timestamp=iso_timestamp(now_ms),
            timestamp_ms=now_ms,
        )
        try:
            results.append(await run_tool(call_input))
        except Exception:
            # A result that could not be parked (a full disk): the answer is written, so the
            # call must not fail for it. Fewer results than calls make the workflow run them
            # all as tool calls, whose failure is a result the model reads.
            break
        parent = entry_id
    return results
