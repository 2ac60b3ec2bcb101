"""A pipeline as it would run: the spec, its base commit and shards, each shard's prompts.

What `--dry-run` shows; built from the same functions the run will use, so what the dry
run prints is what the run does."""

from __future__ import annotations

from pydantic import BaseModel

from tempi.pipeline.prompts import render
from tempi.pipeline.spec import PipelineSpec
from tempi.pipeline.targets import Discovery, Shard, pipeline_id


class PlannedShard(BaseModel):
    shard: Shard
    first_prompt: str


class PipelinePlan(BaseModel):
    pipeline_id: str
    name: str
    discovery: Discovery
    concurrency: int
    branch: str
    shards: list[PlannedShard]


def shard_values(spec: PipelineSpec, shard: Shard, shard_count: int, base_commit: str) -> dict[str, str]:
    return {
        "shard.files": " ".join(shard.files),
        "shard.files_list": "\n".join(shard.files),
        "shard.directory": shard.directory,
        "shard.index": str(shard.index),
        "shard.count": str(shard_count),
        "shard.id": shard.id,
        "pipeline.name": spec.name,
        "pipeline.base": base_commit,
    }


def plan_pipeline(spec: PipelineSpec, discovery: Discovery, concurrency: int | None = None) -> PipelinePlan:
    count = len(discovery.shards)
    first = spec.steps[0].prompt
    return PipelinePlan(
        pipeline_id=pipeline_id(spec, discovery.base_commit),
        name=spec.name,
        discovery=discovery,
        concurrency=concurrency or spec.concurrency,
        branch=spec.branch,
        shards=[
            PlannedShard(
                shard=shard,
                first_prompt=render(first, shard_values(spec, shard, count, discovery.base_commit)),
            )
            for shard in discovery.shards
        ],
    )
