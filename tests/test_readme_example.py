"""The README's "Use tempi from Python" example, run as written against the test server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE
from tests.session_harness import running_worker, scripted_model

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Use tempi from Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's Python section has no code block"
    return match.group(1)


async def test_the_readme_example_starts_streams_and_steers_a_session(
    tmp_path: Path, temporal_address: str, temporal_client: Any, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "readme",
        [
            {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
            {"text": "It is a demo repository."},
            # A steer that lands after the second request (a slow follower on a loaded box)
            # starts one more turn, as in pi; the example's answer must be the same.
            {"text": "It is a demo repository."},
        ],
    )
    namespace: dict[str, Any] = {}
    exec(compile(readme_example(), str(README), "exec"), namespace)
    cwd = tmp_path / "work"
    cwd.mkdir()
    # The example uses the default task queue, as `tempi worker` does.
    async with running_worker(temporal_client, tmp_path / "sessions", DEFAULT_TASK_QUEUE):
        answer = await namespace["explain"](
            temporal_address, scripted_model(scripted_server, "readme"), tmp_path / "sessions", cwd
        )
    assert answer == "It is a demo repository."
    second_request = json.dumps(scripted_server.requests_for("readme")[-1].body)
    assert "Read the files instead of running commands." in second_request  # the steer arrived
