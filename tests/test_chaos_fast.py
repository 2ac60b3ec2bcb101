"""A fast subset of the chaos scenarios (python -m chaos runs them all, 20 times each):
a worker killed mid-session, model streams cut mid-way, HTTP error bursts, and garbage
on RPC stdin. Each checks that the session ends (finished, or with a clear error), that
its file holds every entry once and in tree order, and that the workspace matches what
the tool results claim."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from temporalio.client import Client

from chaos.rig import ChaosRig
from chaos.scenarios import llm_drop, llm_error_bursts, rpc_garbage, worker_sigkill
from tempi.testing.scripted_llm import ScriptedLLMServer

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow


@pytest.fixture
def rig(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> ChaosRig:
    return ChaosRig(directory=tmp_path, address=temporal_address, client=temporal_client, llm=scripted_server)


async def test_worker_killed_mid_session_then_replaced_finishes_cleanly(rig: ChaosRig) -> None:
    note = await worker_sigkill(rig, random.Random(7))
    assert note.endswith("completed"), note


async def test_cut_model_streams_are_retried_and_the_session_finishes(rig: ChaosRig) -> None:
    note = await llm_drop(rig, random.Random(3))
    assert note.endswith("completed"), note


async def test_error_bursts_are_absorbed_or_end_with_the_http_error(rig: ChaosRig) -> None:
    note = await llm_error_bursts(rig, random.Random(5))
    assert "absorbed" in note and "fatal" in note, note


async def test_rpc_mode_answers_garbage_with_errors_and_keeps_serving(rig: ChaosRig) -> None:
    note = await rpc_garbage(rig, random.Random(11))
    assert "then a prompt worked" in note, note
