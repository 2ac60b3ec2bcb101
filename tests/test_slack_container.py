"""`--sandbox container:NAME` (mom's `--sandbox=docker:NAME`): tools run in a container the
user made and keeps, through a real `tempi slack` process, the scripted Slack server, a
real Temporal dev server and a real Docker engine."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import ScriptedSlackServer
from tests.conftest import run_tempi, tempi_env
from tests.docker_support import docker_client, sandbox_image  # noqa: F401 (fixtures)
from tests.test_slack_gateway import gateway_env, running_gateway, slack, wait_for  # noqa: F401 (fixtures)
from tests.test_slack_prompt import system_prompts

pytestmark = pytest.mark.slow

CONTAINER_SCENARIO = "slack-user-container"


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    # Three runs, one after another, served in order.
    return CONTAINER_SCENARIO, {
        "select": "sequential",
        "turns": [
            # The last count: variables of the worker's (model key, Slack tokens) the command sees.
            _bash(
                "echo tool-v1 > /opt/made-by-run-1 && printf 'weekly numbers' > report.md && pwd && id -u"
                " && (env | grep -c -e sk-mock -e xoxb- -e xapp- -e MOCK_API_KEY -e MOM_SLACK || true)"
            ),
            {
                "tool_calls": [
                    {"name": "attach", "arguments": {"label": "the report", "path": "/workspace/report.md"}}
                ]
            },
            {"text": "First run done."},
            _bash("cat /opt/made-by-run-1"),
            {"text": "Second run done."},
            _bash("echo started; sleep 60"),
            {"text": "Third run done."},
        ],
    }


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "mom"
    path.mkdir()
    return path


@pytest.fixture
def user_container(docker_client: Any, sandbox_image: str, workdir: Path) -> Iterator[Any]:  # noqa: F811
    """mom's container: long-lived, root, the working directory at /workspace."""
    container = docker_client.containers.run(
        sandbox_image,
        ["sleep", "infinity"],
        name=f"tempi-test-user-{uuid.uuid4().hex[:10]}",
        user="0:0",
        volumes={str(workdir): {"bind": "/workspace", "mode": "rw"}},
        detach=True,
        init=True,
    )
    yield container
    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True)


def _answered(server: ScriptedSlackServer, channel: str, text: str) -> bool:
    return any(m.text == text for m in server.bot_messages(channel))


def _thread_texts(server: ScriptedSlackServer, channel: str, thread: str) -> list[str]:
    return [m.text for m in server.bot_messages(channel) if m.thread_ts == thread]


async def test_tools_run_in_the_users_container_which_keeps_what_they_leave(
    slack: ScriptedSlackServer,  # noqa: F811
    tmp_path: Path,
    gateway_env: dict[str, str],  # noqa: F811
    workdir: Path,
    user_container: Any,
    scripted_server: ScriptedLLMServer,
) -> None:
    name = user_container.name
    args = ["--sandbox", f"container:{name}"]
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    bot = f"<@{slack.bot_user_id}>"

    async with running_gateway(slack, tmp_path, gateway_env, workdir, args):
        first = slack.user_says(alice, general, f"{bot} make the report and share it")
        await wait_for(lambda: _answered(slack, general, "First run done."), "the first answer")
    # The command ran as the container's root, from the mount of the working directory,
    # and what it wrote there is on the host.
    # Nothing of the worker's environment reached it (issue 42: the container sandbox).
    assert any("*Result:*\n```/workspace\n0\n0" in t for t in _thread_texts(slack, general, first))
    assert (workdir / "report.md").read_text() == "weekly numbers"
    # mom's prompt names the workspace where the tools see it.
    prompt = system_prompts(scripted_server, CONTAINER_SCENARIO)[0]
    assert "Wake yourself up with JSON files in /workspace/events/" in prompt
    assert str(workdir) not in prompt
    # attach named /workspace/report.md; the upload read it from the host side.
    [shared] = [m for m in slack.bot_messages(general) if m.file_ids]
    assert slack.file_content(shared.file_ids[0]) == b"weekly numbers"

    # A new `tempi slack` run finds what the first left in the container, outside /workspace.
    async with running_gateway(slack, tmp_path, gateway_env, workdir, args):
        second = slack.user_says(alice, general, f"{bot} what did the last run install?")
        await wait_for(lambda: _answered(slack, general, "Second run done."), "the second answer")
        assert any("*Result:*\n```tool-v1" in t for t in _thread_texts(slack, general, second))

        # The user removes the container while a command runs: the tool says so, the run ends.
        slack.user_says(alice, general, f"{bot} one more", thread_ts=second)
        await wait_for(
            lambda: any(any("sleep 60" in t for t in m.texts) for m in slack.bot_messages(general)),
            "the long command to start",
        )
        user_container.remove(force=True)
        await wait_for(lambda: _answered(slack, general, "Third run done."), "the third answer", timeout=40)
    failed = [t for t in _thread_texts(slack, general, second) if t.startswith("*✗ bash*")]
    assert failed and f"docker run -d --name {name} -v" in failed[0], failed
    # tempi never made, stopped or removed a container of its own for this.
    assert user_container.client.containers.list(all=True, filters={"name": name}) == []


async def test_a_stopped_or_missing_container_is_refused_before_anything_starts(
    tmp_path: Path,
    workdir: Path,
    user_container: Any,
) -> None:
    name = user_container.name
    user_container.stop(timeout=1)
    env = tempi_env(tmp_path / "home", None, MOM_SLACK_APP_TOKEN="xapp-1", MOM_SLACK_BOT_TOKEN="xoxb-1")

    slack_run = run_tempi(
        ["slack", "--model", "faux/demo", "--sandbox", f"container:{name}", str(workdir)],
        cwd=tmp_path,
        env=env,
    )
    assert slack_run.returncode != 0
    assert f"The container {name} is exited; start it with `docker start {name}`" in slack_run.stderr

    missing = f"{name}-missing"
    print_run = run_tempi(
        ["-p", "--model", "faux/demo", "--sandbox", f"container:{missing}", "hello"], cwd=workdir, env=env
    )
    assert print_run.returncode != 0
    assert f"There is no container {missing}" in print_run.stderr
    assert f"docker run -d --name {missing} -v {workdir.resolve()}:/workspace" in print_run.stderr


def test_help_names_the_container_sandbox(tmp_path: Path) -> None:
    env = tempi_env(tmp_path / "home", None)
    for argv in (["--help"], ["slack", "--help"]):
        shown = run_tempi(argv, cwd=tmp_path, env=env)
        assert shown.returncode == 0 and "container:NAME" in shown.stdout, argv
