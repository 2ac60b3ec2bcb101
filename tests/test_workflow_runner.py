"""Which sandbox runner a worker gets: the one that answers the SDK's per-payload context
questions outside the sandbox only where no part of the converter could read the answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from tempi.workers.codec import data_converter, parse_keys
from tempi.workers.workflow_runner import ContextFreeSandboxRunner, workflow_runner


class ContextReadingCodec(PayloadCodec, WithSerializationContext):
    """A codec that would key its work on the workflow or activity it serializes for."""

    def __init__(self, context: SerializationContext | None = None) -> None:
        self.context = context

    def with_context(self, context: SerializationContext) -> ContextReadingCodec:
        return ContextReadingCodec(context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


def test_tempis_converters_skip_the_sandbox_trip() -> None:
    ring = parse_keys("k1:" + "A" * 43 + "=", "test")
    for converter in (pydantic_data_converter, data_converter(None), data_converter(ring)):
        assert isinstance(workflow_runner(converter), ContextFreeSandboxRunner)


def test_a_converter_that_reads_context_keeps_the_plain_sandbox() -> None:
    converter = replace(pydantic_data_converter, payload_codec=ContextReadingCodec())
    runner = workflow_runner(converter)
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert not isinstance(runner, ContextFreeSandboxRunner)
