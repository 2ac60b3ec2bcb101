"""Tool calls whose arguments were replaced before they reached the workflow.

A provider can stream arguments that cannot travel: a lone surrogate such as `\\udcff`
(not encodable as UTF-8, so neither Temporal nor the session file can carry it) or a few
megabytes of JSON (over Temporal's 2 MB payload limit) or JSON nested hundreds of levels
deep (past what a parser or serializer recurses through). The provider stream replaces such
arguments with `{INVALID_ARGUMENTS_KEY: reason}`; `execute_tool` answers that call with
the reason as a tool error, so only that call fails and the turn goes on.
"""

from __future__ import annotations

from typing import Any

INVALID_ARGUMENTS_KEY = "_tempi_invalid_arguments"

# One message's tool arguments together, as UTF-8 JSON. The assistant message crosses
# Temporal twice (the LLM result, then each call's tool input) and must stay under the
# 2 MB payload limit with its text and thinking; no real model writes this much per turn.
MAX_TOOL_ARGUMENTS_BYTES = 1_000_000


def invalid_arguments(reason: str) -> dict[str, Any]:
    return {INVALID_ARGUMENTS_KEY: reason}


def invalid_arguments_reason(args: Any) -> str | None:
    """The reason a call's arguments were replaced, or None for ordinary arguments."""
    if isinstance(args, dict) and len(args) == 1:
        reason = args.get(INVALID_ARGUMENTS_KEY)
        if isinstance(reason, str):
            return reason
    return None


def not_unicode_reason() -> str:
    return (
        "The arguments of this call were not valid Unicode (they held a lone surrogate such as "
        "\\udcff), so the call was not run. Send it again with valid text. To name a file whose "
        "name is not valid UTF-8, write each undecodable byte as \\xHH, the form ls, find and grep show."
    )


def too_large_reason(size: int, limit: int, used: int = 0) -> str:
    shown_limit = f"{limit / 1_000_000:g} MB limit for the tool arguments of one message"
    if used:
        over = (
            f"The arguments of this call ({size / 1_000_000:.1f} MB of JSON) would bring this "
            f"message's tool calls over the {shown_limit}"
        )
    else:
        over = f"The arguments of this call were {size / 1_000_000:.1f} MB of JSON, over the {shown_limit}"
    return (
        f"{over}, so the call was not run. Split the work over several calls: write a large "
        "file in parts (write the first part, then append the rest, e.g. with bash and cat >> file)."
    )


def too_deep_reason(depth: int, limit: int) -> str:
    return (
        f"The arguments of this call were JSON nested {depth} levels deep, over the limit of {limit} "
        "levels, so the call was not run. Send it again with the arguments nested less deeply "
        "(pass deep data as a string, or write it to a file first)."
    )
