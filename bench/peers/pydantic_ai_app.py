"""The benchmark's agent on pydantic-ai's Temporal integration, as its guide writes one: an
`Agent` on the default OpenAI model class (`openai:` is the Responses API), wrapped in
`TemporalAgent` (model calls and tool calls become activities), registered through
`PydanticAIWorkflow` and `PydanticAIPlugin`."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, PydanticAIWorkflow, TemporalAgent
from pydantic_ai.usage import UsageLimits
from temporalio import workflow

from bench.peers.tools import read_file, run_command

MODEL = "openai:mock-model"
INSTRUCTIONS = "You are a test agent."

agent = Agent(MODEL, name="bench", instructions=INSTRUCTIONS)


@agent.tool_plain
async def read(path: str) -> str:
    """Read the file at `path` and return its text."""
    return read_file(path)


@agent.tool_plain
async def bash(command: str) -> str:
    """Run a shell command and return what it printed."""
    return await run_command(command)


with warnings.catch_warnings():
    # pydantic-ai 2.x suggests its TemporalDurability capability instead; TemporalAgent is the
    # documented wrapper the comparison names, and both put the same calls in activities.
    # (Its deprecation warning is a UserWarning.)
    warnings.simplefilter("ignore", UserWarning)
    temporal_agent = TemporalAgent(agent)


@workflow.defn(name="BenchPydanticAI")
class BenchAgent(PydanticAIWorkflow):
    __pydantic_ai_agents__ = (temporal_agent,)

    @workflow.run
    async def run(self, prompt: str) -> str:
        # The default limit is 50 model requests; the benchmark's runs have 51.
        result = await temporal_agent.run(prompt, usage_limits=UsageLimits(request_limit=None))
        return result.output


WORKFLOW = BenchAgent


def client_plugins() -> list[Any]:
    return [PydanticAIPlugin()]


def worker_options() -> dict[str, Any]:
    return {"workflows": [BenchAgent]}
