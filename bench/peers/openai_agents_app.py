"""The benchmark's agent on Temporal's OpenAI Agents integration, as its guide writes one:
`OpenAIAgentsPlugin` on the client (model calls become activities, through the default
`OpenAIProvider`, i.e. the Responses API) and the two I/O tools as activities through
`activity_as_tool`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from temporalio import activity, workflow
from temporalio.contrib.openai_agents import OpenAIAgentsPlugin
from temporalio.contrib.openai_agents.workflow import activity_as_tool

from bench.peers.tools import read_file, run_command

MODEL = "mock-model"
INSTRUCTIONS = "You are a test agent."
# The SDK stops a run after 10 model calls unless told; the benchmark's runs have 51.
MAX_TURNS = 1000
TOOL_TIMEOUT = timedelta(seconds=60)


@activity.defn(name="read")
async def read(path: str) -> str:
    """Read the file at `path` and return its text."""
    return read_file(path)


@activity.defn(name="bash")
async def bash(command: str) -> str:
    """Run a shell command and return what it printed."""
    return await run_command(command)


@workflow.defn(name="BenchOpenAIAgents")
class BenchAgent:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(
            name="bench",
            instructions=INSTRUCTIONS,
            model=MODEL,
            tools=[
                activity_as_tool(read, start_to_close_timeout=TOOL_TIMEOUT),
                activity_as_tool(bash, start_to_close_timeout=TOOL_TIMEOUT),
            ],
        )
        result = await Runner.run(agent, input=prompt, max_turns=MAX_TURNS)
        return str(result.final_output)


WORKFLOW = BenchAgent


def client_plugins() -> list[Any]:
    # Traces would otherwise be exported to OpenAI's platform; this machine only talks to loopback.
    set_tracing_disabled(True)
    return [OpenAIAgentsPlugin()]


def worker_options() -> dict[str, Any]:
    return {"workflows": [BenchAgent], "activities": [read, bash]}
