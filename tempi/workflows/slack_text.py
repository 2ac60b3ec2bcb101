"""What a Slack conversation shows, as mom words and cuts it: pure functions of text, so the
conversation workflow can use them and tests can check them alone."""

from __future__ import annotations

import re

from tempi.agent.token_counts import short_tokens
from tempi.workflows.slack_types import RunUsage, SlackMessage, ToolEnded

MAIN_LIMIT = 35_000
THREAD_LIMIT = 20_000
# Slack keeps 40,000 characters of a message; longer answers go out in parts.
SLACK_MAX = 40_000
SILENT = "[SILENT]"

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


def is_stop(text: str) -> bool:
    return _MENTION.sub("", text).strip().lower() == "stop"


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + "\n\n_(message truncated, ask me to elaborate on specific parts)_"


def tool_detail(ended: ToolEnded, seconds: float | None) -> str:
    mark = "✗" if ended.is_error else "✓"
    took = f" ({seconds:.1f}s)" if seconds is not None else ""
    text = f"*{mark} {ended.tool}*: {ended.label}{took}"
    if ended.args:
        text += f"\n```{ended.args}```"
    if ended.result:
        text += f"\n*Result:*\n```{ended.result}```"
    return cut(text, THREAD_LIMIT)


# Everything a model may take for a line break (str.splitlines' set).
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# Invisible characters that could hide a header's `[` from a check of the line's first character.
_INVISIBLE = " \t\u00a0\u200b\u200c\u200d\u200e\u200f\u2060\u3000\ufeff"
_ATTACHMENTS_TAG = re.compile(r"</?\s*slack_attachments\s*>", re.IGNORECASE)


def quote_text(text: str) -> str:
    """Someone's text as it goes after their `[name]: ` in a prompt, kept inside their message:
    a later line that starts like one of tempi's own lines (`[name]: ...`, `[stamp] [name]: ...`,
    `[EVENT:...]`, a `[bot]` line) gets a `\\` before it, and `<slack_attachments>` is spelled
    as Slack escapes it, so no one can speak as someone else, the bot, an event, or attach a file."""
    first, *rest = _LINE_BREAK.split(text)
    quoted = [first] + ["\\" + line if line.lstrip(_INVISIBLE).startswith("[") else line for line in rest]
    joined = "\n".join(quoted)
    return _ATTACHMENTS_TAG.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), joined)


def quote_name(name: str) -> str:
    """A Slack name for a `[name]` header or the system prompt's ID table: one line, no brackets."""
    flat = " ".join(_LINE_BREAK.split(name))
    return "".join(c if c.isprintable() else " " for c in flat).replace("[", "(").replace("]", ")")[:80]


def prompt_text(messages: list[SlackMessage]) -> str:
    """mom's prompt: earlier messages as `[userName]: text`, the current one stamped."""
    *earlier, current = messages
    lines = [f"[{quote_name(m.user_name)}]: {quote_text(m.text)}" for m in earlier]
    lines.append(f"[{current.stamp}] [{quote_name(current.user_name)}]: {quote_text(current.text)}")
    return "\n".join(lines)


def is_silent(text: str) -> bool:
    return text.strip().startswith(SILENT)


def split_for_slack(text: str) -> list[str]:
    """mom's split: parts of 40,000 - 50 characters, each but the last marked as continued."""
    if len(text) <= SLACK_MAX:
        return [text]
    size = SLACK_MAX - 50
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    return [f"{chunk}\n_(continued {n}...)_" for n, chunk in enumerate(chunks[:-1], 1)] + chunks[-1:]


def main_answer(text: str) -> str:
    if len(text) <= SLACK_MAX:
        return text
    return text[: SLACK_MAX - 50] + "\n\n_(see thread for full response)_"


def usage_summary(usage: RunUsage, context_tokens: int, context_window: int) -> str:
    """mom's usage summary, posted in the thread at the end of a run that cost something."""
    cached = usage.cache_read > 0 or usage.cache_write > 0
    lines = ["*Usage Summary*", f"Tokens: {usage.input:,} in, {usage.output:,} out"]
    if cached:
        lines.append(f"Cache: {usage.cache_read:,} read, {usage.cache_write:,} write")
    if context_tokens and context_window:
        percent = context_tokens / context_window * 100
        lines.append(
            f"Context: {short_tokens(context_tokens)} / {short_tokens(context_window)} ({percent:.1f}%)"
        )
    cost = f"Cost: ${usage.cost_input:.4f} in, ${usage.cost_output:.4f} out"
    if cached:
        cost += f", ${usage.cost_cache_read:.4f} cache read, ${usage.cost_cache_write:.4f} cache write"
    lines += [cost, f"*Total: ${usage.cost_total:.4f}*"]
    return "\n".join(lines)
