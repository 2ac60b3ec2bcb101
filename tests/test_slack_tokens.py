"""Issue 37, item 1: `tempi slack` with a token Slack refuses stops at once with one line
naming the variable and Slack's error (exit 2), and waits out Slack being down, failing or
rate limiting, saying so. A real `tempi slack` process against the scripted Slack server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tempi.testing.slack_server import ScriptedSlackServer
from tempi.workers.dev_server import free_port
from tests.conftest import tempi_env
from tests.test_slack_gateway import wait_for

WRONG_APP = "xapp-1-A0TEMPIAPP-not-this-one"
WRONG_BOT = "xoxb-0000-not-this-one"


@pytest.fixture
async def slack() -> AsyncIterator[ScriptedSlackServer]:
    async with ScriptedSlackServer() as server:
        yield server


def env_for(tmp_path: Path, temporal_address: str, api_url: str, **tokens: str) -> dict[str, str]:
    env = tempi_env(tmp_path / "home", temporal_address, TEMPI_SLACK_API_URL=api_url, **tokens)
    for name in ("MOM_SLACK_APP_TOKEN", "MOM_SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN"):
        if name not in tokens:
            env.pop(name, None)
    return env


async def start(tmp_path: Path, env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tempi", "slack", "--model", "faux/demo", *args,
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finish(proc: asyncio.subprocess.Process, timeout: float = 30) -> tuple[int, str]:
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        _, err = await proc.communicate()
        raise AssertionError(f"tempi slack did not exit; stderr so far: {err.decode()!r}") from None
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def assert_one_line_refusal(code: int, err: str, *expected: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for part in expected:
        assert part in lines[0], lines[0]


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        pytest.param(
            {"MOM_SLACK_APP_TOKEN": WRONG_APP, "MOM_SLACK_BOT_TOKEN": "{bot}"},
            ["Slack refused MOM_SLACK_APP_TOKEN (invalid_auth)"],
            id="invalid-app-token",
        ),
        pytest.param(
            {"MOM_SLACK_APP_TOKEN": "{app}", "MOM_SLACK_BOT_TOKEN": WRONG_BOT},
            ["Slack refused MOM_SLACK_BOT_TOKEN (invalid_auth)"],
            id="invalid-bot-token",
        ),
        pytest.param(
            {"MOM_SLACK_APP_TOKEN": "{bot}", "MOM_SLACK_BOT_TOKEN": "{bot}"},
            ["MOM_SLACK_APP_TOKEN (not_allowed_token_type)", "it holds a bot token (xoxb-…)"],
            id="bot-token-as-app-token",
        ),
        pytest.param(
            {"MOM_SLACK_APP_TOKEN": "{app}", "MOM_SLACK_BOT_TOKEN": "{app}"},
            ["MOM_SLACK_BOT_TOKEN (not_allowed_token_type)", "it holds an app-level token (xapp-…)"],
            id="app-token-as-bot-token",
        ),
        pytest.param(
            {"SLACK_APP_TOKEN": WRONG_APP, "SLACK_BOT_TOKEN": "{bot}"},
            ["Slack refused SLACK_APP_TOKEN (invalid_auth)"],
            id="slacks-own-variable-names",
        ),
    ],
)
async def test_a_refused_token_is_one_line_naming_its_variable_and_slacks_error(
    slack: ScriptedSlackServer,
    tmp_path: Path,
    temporal_address: str,
    tokens: dict[str, str],
    expected: list[str],
) -> None:
    values = {k: v.format(bot=slack.bot_token, app=slack.app_token) for k, v in tokens.items()}
    env = env_for(tmp_path, temporal_address, slack.api_url, **values)
    code, err = await finish(await start(tmp_path, env, str(tmp_path / "mom")))
    assert_one_line_refusal(code, err, *expected)
    assert not any(value in err for value in values.values())  # the token itself is never printed
    assert slack.connections_opened == 0


async def test_a_revoked_app_token_is_named(
    slack: ScriptedSlackServer, tmp_path: Path, temporal_address: str
) -> None:
    slack.revoke(slack.app_token)
    env = env_for(
        tmp_path,
        temporal_address,
        slack.api_url,
        MOM_SLACK_APP_TOKEN=slack.app_token,
        MOM_SLACK_BOT_TOKEN=slack.bot_token,
    )
    code, err = await finish(await start(tmp_path, env, str(tmp_path / "mom")))
    assert_one_line_refusal(code, err, "MOM_SLACK_APP_TOKEN (token_revoked)", "revoked")


async def test_download_with_a_bad_token_blames_the_token_not_the_channel(
    slack: ScriptedSlackServer, tmp_path: Path, temporal_address: str
) -> None:
    general = slack.add_channel("general")
    env = env_for(tmp_path, temporal_address, slack.api_url, MOM_SLACK_BOT_TOKEN=WRONG_BOT)
    code, err = await finish(await start(tmp_path, env, "--download", general))
    assert_one_line_refusal(code, err, "Slack refused MOM_SLACK_BOT_TOKEN (invalid_auth)")
    assert "channel" not in err


async def test_slack_failing_or_rate_limiting_at_start_is_waited_out_saying_so(
    slack: ScriptedSlackServer, tmp_path: Path, temporal_address: str
) -> None:
    slack.fail("auth.test", times=2, status=503)
    slack.rate_limit("apps.connections.open", times=1, retry_after=1)
    env = env_for(
        tmp_path,
        temporal_address,
        slack.api_url,
        MOM_SLACK_APP_TOKEN=slack.app_token,
        MOM_SLACK_BOT_TOKEN=slack.bot_token,
    )
    proc = await start(tmp_path, env, str(tmp_path / "mom"))
    try:
        await wait_for(lambda: slack.connections_opened > 0, "the gateway's connection", timeout=60)
    finally:
        proc.terminate()
        _, err = await finish(proc)
    lines = err.splitlines()
    assert [line for line in lines if "retrying" in line] == [
        "tempi slack: checking the bot token: Slack answered service_unavailable; retrying in 1s",
        "tempi slack: checking the bot token: Slack answered service_unavailable; retrying in 2s",
        "tempi slack: checking the app token: Slack answered ratelimited; retrying in 1s",
    ], err
    # (On failure, the whole traceback: pytest would cut the string short.)
    assert "Traceback" not in err, err[max(0, err.index("Traceback") - 200) :]


async def test_slack_unreachable_at_start_is_retried_until_it_answers(
    tmp_path: Path, temporal_address: str
) -> None:
    port = free_port()
    env = env_for(
        tmp_path,
        temporal_address,
        f"http://127.0.0.1:{port}/api/",
        MOM_SLACK_APP_TOKEN=WRONG_APP,
        MOM_SLACK_BOT_TOKEN="xoxb-0000-scripted-bot-token",
    )
    proc = await start(tmp_path, env, str(tmp_path / "mom"))
    assert proc.stderr is not None
    first = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
    assert first.startswith(
        f"tempi slack: checking the bot token: cannot reach Slack at http://127.0.0.1:{port}/api/"
    ), first
    assert first.rstrip().endswith("retrying in 1s"), first
    # Slack comes back: the start goes on, and stops at the app token it refuses.
    async with ScriptedSlackServer(port=port):
        code, err = await finish(proc)
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith("tempi slack: Slack refused MOM_SLACK_APP_TOKEN")
