"""Commands run by tools never see the worker's secrets: provider keys, Temporal and Slack
tokens, MCP secrets. They keep what a shell needs, plus what TEMPI_TOOL_ENV names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tempi.activities.tools.bwrap_backend import BwrapBackend
from tempi.activities.tools.local_backend import LocalBackend
from tempi.activities.tools.tool_env import tool_environment
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-leak-0001",
    "OPENAI_API_KEY": "sk-openai-leak-0002",
    "SLACK_BOT_TOKEN": "xoxb-leak-0003",
    "TEMPORAL_API_KEY": "temporal-leak-0004",
    "MCP_GITHUB_SECRET": "ghp-leak-0005",
    "TEMPORAL_ADDRESS_SHADOW": "temporal-leak-0006",
    "https_proxy": "http://alice:hunter2-leak-0007@proxy.example:3128",
}
ASKED_FOR = {"MY_TOOL_SETTING": "passed-on-purpose", "NPM_CONFIG_REGISTRY": "https://registry.example"}


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


def _assert_scrubbed(text: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name} reached the tool"
    assert "hunter2" not in text
    for name, value in ASKED_FOR.items():
        assert f"{name}={value}" in text, f"{name} from TEMPI_TOOL_ENV did not reach the tool"


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The secrets in this process's environment, which is the worker's in these tests."""
    for name, value in {**SECRETS, **ASKED_FOR}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEMPI_TOOL_ENV", "MY_TOOL_SETTING, NPM_CONFIG_*")


# What `env` must show and where it must still work: PATH finds programs, HOME is set.
PROBE = 'env; echo "home=$HOME"; command -v ls >/dev/null && echo path-works'


def test_selection_rules() -> None:
    source = {
        "PATH": "/bin",
        "LC_ALL": "C.UTF-8",
        "HOME": "/home/me",
        "AWS_SESSION_TOKEN": "t",
        "GITHUB_TOKEN": "t",
        "NPM_CONFIG_AUTH_TOKEN": "t",  # a prefix pattern does not take a secret-looking name
        "NPM_CONFIG_CACHE": "/c",
        "DEPLOY_KEY": "k",  # named exactly: the user's deliberate choice
        "TEMPORAL_ADDRESS": "host:7233",  # never, even when named
        "TEMPI_CODEC_KEYS": "k1:AAAA",  # the history's keys: never, even when named
        "no_proxy": "localhost",
        "http_proxy": "http://proxy:3128",
        "HTTPS_PROXY": "http://u:p@proxy:3128",
        "GIT_AUTHOR_NAME": "me",
    }
    env = tool_environment(
        source, "NPM_CONFIG_*,DEPLOY_KEY:TEMPORAL_ADDRESS GIT_AUTHOR_NAME TEMPI_CODEC_KEYS"
    )
    assert env == {
        "PATH": "/bin",
        "LC_ALL": "C.UTF-8",
        "HOME": "/home/me",
        "NPM_CONFIG_CACHE": "/c",
        "DEPLOY_KEY": "k",
        "no_proxy": "localhost",
        "http_proxy": "http://proxy:3128",
        "GIT_AUTHOR_NAME": "me",
    }
    assert tool_environment({})["PATH"]  # commands find the basics even so


async def test_local_bash_sees_no_worker_secrets(tmp_path: Path, worker_env: None) -> None:
    ctx = ToolContext(cwd=str(tmp_path), backend=LocalBackend(), spill_dir=str(tmp_path / "spill"))
    text = _text(await execute_tool("bash", {"command": PROBE}, ctx))
    _assert_scrubbed(text)
    assert "path-works" in text
    assert f"home={Path.home()}" in text


async def test_bwrap_bash_sees_no_worker_secrets(tmp_path: Path, worker_env: None) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ctx = ToolContext(
        cwd=str(workspace), backend=BwrapBackend(str(workspace)), spill_dir=str(tmp_path / "spill")
    )
    probe = await execute_tool("bash", {"command": "true"}, ctx)
    if probe.is_error:
        pytest.skip(f"bubblewrap cannot run here: {_text(probe)}")
    text = _text(await execute_tool("bash", {"command": PROBE}, ctx))
    _assert_scrubbed(text)
    assert "path-works" in text


async def test_session_bash_and_user_bash_see_no_worker_secrets(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer, worker_env: None
) -> None:
    scripted_server.add_scenario(
        "env-leak-session",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": PROBE}}]}, {"text": "done"}],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        session = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "env-leak-session"), task_queue=queue
        )
        await session.prompt("show me the environment")
        await session.run_to_idle()
        user = await session.session.bash(PROBE)
    _assert_scrubbed(user.output)
    assert "path-works" in user.output
    results = [
        e["message"]
        for e in session.events
        if e["type"] == "message_end" and e["message"]["role"] == "toolResult"
    ]
    assert len(results) == 1
    _assert_scrubbed(json.dumps(results[0]))
    session_file = next((tmp_path / "sessions").rglob("*.jsonl")).read_text()
    for value in SECRETS.values():
        assert value not in session_file


def test_cli_session_file_holds_no_worker_secrets(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    """The real `tempi` process, whose in-process worker holds the keys, runs `env`."""
    scripted_server.add_scenario(
        "env-leak-cli",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": PROBE}}]}, {"text": "done"}],
    )
    home = tmp_path / "home"
    work = tmp_path / "project"
    work.mkdir()
    write_models_json(home, scripted_server, "env-leak-cli")
    # A TEMPORAL_API_KEY here would make the CLI itself talk TLS to the test's plain dev server.
    secrets = {name: value for name, value in SECRETS.items() if name != "TEMPORAL_API_KEY"}
    env = tempi_env(
        home, temporal_address, **secrets, **ASKED_FOR, TEMPI_TOOL_ENV="MY_TOOL_SETTING,NPM_CONFIG_*"
    )
    proc = run_tempi(
        ["--mode", "json", "--model", "mock/mock-model", "--tools", "bash", "-p", "show me the environment"],
        cwd=work,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    tool_ends = [json.loads(line) for line in proc.stdout.splitlines() if '"tool_execution_end"' in line]
    assert len(tool_ends) == 1
    _assert_scrubbed(json.dumps(tool_ends[0]))
    assert "path-works" in json.dumps(tool_ends[0])
    session_file = next((home / "sessions").rglob("*.jsonl")).read_text()
    assert "MOCK_API_KEY=" not in session_file and "sk-mock-secret-key-12345" not in session_file
    for value in SECRETS.values():
        assert value not in session_file
        assert value not in proc.stdout
