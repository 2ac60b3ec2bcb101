"""The offline demo model (`faux/demo`): a tiny scripted agent that looks around the
working directory with a tool and reports back, so tempi's whole path (workflow, LLM
activity, tool activity, session file) can be tried without an API key."""

from __future__ import annotations

from tempi.activities.llm.faux_responses import FauxResponse, FauxToolCall
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import ToolResultMessage, UserMessage

DEMO_MODEL_ID = "demo"


def demo_response(context: LlmContext) -> FauxResponse:
    last = context.messages[-1] if context.messages else None
    tools = {t.name for t in context.tools}
    if isinstance(last, UserMessage):
        request = last.text().strip().splitlines()[0][:200] if last.text().strip() else "(an empty prompt)"
        if "ls" in tools:
            call = FauxToolCall(name="ls", arguments={"path": "."})
        elif "bash" in tools:
            call = FauxToolCall(name="bash", arguments={"command": "ls -la"})
        else:
            return FauxResponse(
                text=f"(offline demo) You asked: {request}\nI have no tools here, so that is all."
            )
        return FauxResponse(
            text=f"(offline demo) You asked: {request}\nLet me look at the working directory first.",
            tool_calls=[call],
        )
    if isinstance(last, ToolResultMessage):
        lines = last.text().splitlines()
        shown = "\n".join(lines[:20]) + (f"\n… and {len(lines) - 20} more lines" if len(lines) > 20 else "")
        return FauxResponse(
            text="(offline demo) Here is what I found:\n\n"
            f"{shown}\n\nThis answer came from tempi's offline demo model. Set ANTHROPIC_API_KEY or "
            "OPENAI_API_KEY (or add a provider in ~/.tempi/models.json) to work with a real model."
        )
    return FauxResponse(text="(offline demo) Nothing more to do.")
