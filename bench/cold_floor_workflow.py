"""The workflow of bench.cold_floor, apart so the workflow sandbox imports nothing else."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

FIRST_TOKEN = "first-token"


@activity.defn(name="floor_stream_first_token")
async def stream_first_token(base_url: str) -> None:
    """Stream the scripted answer and say so at its first token, as `--mode json` does."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="sk-bench-not-a-secret")
    stream = await client.chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    said = False
    async for chunk in stream:
        if not said and chunk.choices and chunk.choices[0].delta.content:
            print(FIRST_TOKEN, flush=True)
            said = True


@workflow.defn(name="BenchColdFloor")
class FirstToken:
    @workflow.run
    async def run(self, base_url: str) -> None:
        await workflow.execute_activity(
            stream_first_token, base_url, start_to_close_timeout=timedelta(seconds=30)
        )
