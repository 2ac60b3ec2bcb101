"""What `tempi slack` keeps of a channel, as mom does: log.jsonl with every message (the
bot's answers too), attachments fetched with the bot token, the pi session in
context.jsonl, backfill of what was said while no gateway ran, and `--download`."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import Attachment, ScriptedSlackServer
from tempi.testing.slack_server.events import event_callback, user_message_events
from tests import test_slack_gateway
from tests.test_slack_gateway import finished, running_gateway, wait_for

# The gateway tests' fixtures, shared rather than copied.
slack = test_slack_gateway.slack
gateway_env = test_slack_gateway.gateway_env

FIXTURES = Path(__file__).parent / "fixtures" / "slack"
UPDATE_GOLDEN = os.environ.get("TEMPI_UPDATE_GOLDEN") == "1"

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
SCENARIO = "slack-log-golden"
ANSWER = "The command printed *hello-from-bash*."
SECOND = "Yes, I am here."


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    return SCENARIO, {
        "turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hello-from-bash"}}]},
            {"text": ANSWER},
            {"text": SECOND},
        ]
    }


# --- golden files --------------------------------------------------------------------


class Placeholders:
    """Stable names for what changes from run to run (ts, ids, times), in order of first sight."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, kind: str, value: str) -> str:
        if value not in self.names:
            count = sum(1 for n in self.names.values() if n.startswith(f"<{kind}"))
            self.names[value] = f"<{kind}{count + 1}>"
        return self.names[value]

    def text(self, text: str) -> str:
        text = re.sub(r"\d{10}\.\d{6}", lambda m: self.name("ts", m.group()), text)
        text = re.sub(r"\b\d{13}_", "<ms>_", text)
        text = re.sub(r"\b[UCDB]0[A-Z0-9]{6,}\b", lambda m: self.name("id", m.group()), text)
        text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "<time>", text)
        return text

    def value(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if isinstance(value, str):
            if key in ("id", "parentId", "toolCallId", "responseId") and value:
                return self.name("entry", value)
            if key == "cwd":
                return "<cwd>"
            if key == "data":
                return f"<base64 {len(value)} chars>"
            return self.text(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and key in ("timestamp",):
            return "<epoch ms>"
        return value


def normalized_lines(path: Path, placeholders: Placeholders, workdir: Path) -> list[Any]:
    text = path.read_text().replace(str(workdir.resolve()), "<workdir>")
    return [placeholders.value(json.loads(line)) for line in text.splitlines()]


def assert_golden(actual: list[Any], name: str) -> None:
    golden = FIXTURES / name
    rendered = "".join(json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n" for line in actual)
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered)
    assert golden.exists(), f"no golden file {golden}; TEMPI_UPDATE_GOLDEN=1 writes it"
    assert rendered == golden.read_text(), f"{name} differs from its golden file; see the diff above"


def keys_in_order(path: Path) -> list[list[str]]:
    return [list(json.loads(line)) for line in path.read_text().splitlines()]


# --- end to end ----------------------------------------------------------------------


def logged(channel_dir: Path, text: str) -> bool:
    log = channel_dir / "log.jsonl"
    return log.exists() and text in log.read_text()


def text_of(content: str | list[dict[str, Any]]) -> str:
    """A request message's text, whether the provider sent a string or parts."""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def see_images(models_json: Path) -> None:
    """The scripted model takes images, or pi would leave them out of its requests."""
    models = json.loads(models_json.read_text())
    for provider in models["providers"].values():
        for model in provider["models"]:
            model["input"] = ["text", "image"]
    models_json.write_text(json.dumps(models))


@pytest.mark.slow
async def test_the_channel_log_and_context_are_in_moms_formats(
    slack: ScriptedSlackServer,
    tmp_path: Path,
    gateway_env: dict[str, str],
    scripted_server: ScriptedLLMServer,
) -> None:
    alice = slack.add_user("alice", real_name="Alice Archer")
    bob = slack.add_user("bob", real_name="Bob Baker")
    general = slack.add_channel("general", members=[alice, bob])
    workdir = tmp_path / "mom"
    bot = f"<@{slack.bot_user_id}>"
    args = ["--context", "channel"]
    see_images(Path(gateway_env["TEMPI_HOME"]) / "models.json")

    async with running_gateway(slack, tmp_path, gateway_env, workdir, args):
        slack.user_says(alice, general, "morning all,\nthe deploy is at 3")
        asked = slack.user_says(
            bob,
            general,
            f"{bot} what is in the picture and the notes?",
            files=[
                Attachment("red dot.png", PNG, "image/png"),
                Attachment("notes.txt", b"remember the milk\n", "text/plain"),
            ],
        )
        await wait_for(lambda: finished(slack, general), "the answer")
        await wait_for(lambda: logged(workdir / general, ANSWER), "the answer in log.jsonl")
        # Slack delivering the mention again logs nothing twice (the golden file has it once).
        original = slack.workspace.message(general, asked)
        assert original is not None
        for event in user_message_events(slack.workspace, original):
            slack.hub.publish(event_callback(slack.workspace, event))
        await slack.idle()

    # Said while no gateway listened: the next gateway backfills it before it connects.
    slack.user_says(alice, general, "did the bot see this?")
    async with running_gateway(slack, tmp_path, gateway_env, workdir, args):
        slack.user_says(bob, general, f"{bot} are you still there?")
        await wait_for(
            lambda: any(m.text == SECOND for m in slack.bot_messages(general)), "the second answer"
        )
        await wait_for(lambda: logged(workdir / general, SECOND), "it in the log")

    # The attachments were fetched with the bot token, where mom keeps them.
    attachments = sorted(p.name for p in (workdir / general / "attachments").iterdir())
    stamp = str(int(float(asked) * 1000))
    assert attachments == [f"{stamp}_notes.txt", f"{stamp}_red_dot.png"]
    assert (workdir / general / "attachments" / f"{stamp}_red_dot.png").read_bytes() == PNG

    # The image reached the model as an image block, the other file as a path.
    first_request = scripted_server.requests_for(SCENARIO)[0].body
    *earlier, asking = [m for m in first_request["messages"] if m["role"] == "user"]
    # What alice said before the mention came as a message of its own, as mom syncs the log.
    assert [text_of(m["content"]) for m in earlier] == ["[alice]: morning all,\nthe deploy is at 3"]
    user_parts = asking["content"]
    images = [p for p in user_parts if p.get("type") == "image_url"]
    assert [i["image_url"]["url"] for i in images] == [
        "data:image/png;base64," + base64.b64encode(PNG).decode()
    ]
    [text_part] = [p["text"] for p in user_parts if p.get("type") == "text"]
    assert f"<slack_attachments>\n{workdir.resolve()}/{general}/attachments/{stamp}_notes.txt\n" in text_part
    assert re.match(r"\[[^]]+\] \[bob\]: what is in the picture", text_part), text_part

    log = workdir / general / "log.jsonl"
    # Key order is mom's (JSON.stringify of its object literals).
    user_keys = ["date", "ts", "user", "userName", "displayName", "text", "attachments", "isBot"]
    bot_keys = ["date", "ts", "user", "text", "attachments", "isBot"]
    assert keys_in_order(log) == [user_keys, user_keys, bot_keys, user_keys, user_keys, bot_keys]
    placeholders = Placeholders()
    assert_golden(normalized_lines(log, placeholders, workdir), "log.jsonl")
    assert_golden(
        normalized_lines(workdir / general / "context.jsonl", placeholders, workdir), "context.jsonl"
    )


# --- --download ----------------------------------------------------------------------


async def test_download_prints_a_channel_with_its_threads(slack: ScriptedSlackServer, tmp_path: Path) -> None:
    alice = slack.add_user("alice")
    bob = slack.add_user("bob")
    general = slack.add_channel("general", members=[alice, bob])
    first = slack.user_says(alice, general, "release plan:\n1. tag\n2. ship")
    slack.user_says(bob, general, "sounds good", thread_ts=first)
    slack.user_says(alice, general, "shipping now", thread_ts=first)
    slack.user_says(bob, general, "lunch?")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOM_", "SLACK_", "TEMPORAL_"))}
    env.update(
        TEMPI_HOME=str(tmp_path / "home"),
        MOM_SLACK_BOT_TOKEN=slack.bot_token,
        TEMPI_SLACK_API_URL=slack.api_url,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tempi", "slack", "--download", general,
        env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    when = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]"
    lines = out.decode().splitlines()
    pad = " " * len(f"[2026-01-01 00:00:00] {alice}: ")
    expected = [
        rf"{when} {alice}: release plan:",
        re.escape(f"{pad}1. tag"),
        re.escape(f"{pad}2. ship"),
        rf"  {when} {bob}: sounds good",
        rf"  {when} {alice}: shipping now",
        rf"{when} {bob}: lunch\?",
    ]
    assert len(lines) == len(expected), lines
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert "Done! 2 messages, 2 thread replies" in err.decode()

    # A channel the bot cannot read says what to do instead of a traceback.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tempi", "slack", "--download", "C0NOSUCH",
        env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0
    assert "channel_not_found" in err.decode() and "Traceback" not in err.decode()


THREAD_SCENARIO = "slack-log-thread"


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario",
    [
        (
            THREAD_SCENARIO,
            {"turns": [{"text": "On it."}, {"text": "Noted."}, {"text": "Dave said /var/log/app."}]},
        )
    ],
)
async def test_a_thread_session_gets_its_thread_once_and_not_the_channel_chatter(
    slack: ScriptedSlackServer,
    tmp_path: Path,
    gateway_env: dict[str, str],
    scripted_server: ScriptedLLMServer,
) -> None:
    carol = slack.add_user("carol")
    dave = slack.add_user("dave")
    ops = slack.add_channel("ops", members=[carol, dave])
    workdir = tmp_path / "mom"
    bot = f"<@{slack.bot_user_id}>"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []):
        asked = slack.user_says(carol, ops, f"{bot} find the logs")
        await wait_for(lambda: logged(workdir / ops, "On it."), "the first answer in the log")
        # A plain reply in the bot's thread follows up; chatter outside it is only logged.
        slack.user_says(dave, ops, "they are in /var/log/app", thread_ts=asked)
        await wait_for(lambda: logged(workdir / ops, "Noted."), "the follow-up's answer in the log")
        slack.user_says(dave, ops, "unrelated: lunch at noon?")
        slack.user_says(carol, ops, f"{bot} what did dave say?", thread_ts=asked)
        await wait_for(lambda: logged(workdir / ops, "Dave said"), "the third answer in the log")

    third = scripted_server.requests_for(THREAD_SCENARIO)[2].body
    prompts = [m["content"] for m in third["messages"] if m["role"] == "user"]
    texts = [p if isinstance(p, str) else "".join(part.get("text", "") for part in p) for p in prompts]
    assert re.fullmatch(r"\[[^]]+\] \[carol\]: what did dave say\?", texts[-1]), texts[-1]
    # The thread's reply reached the session once; the channel's other talk never did.
    assert sum("they are in /var/log/app" in t for t in texts) == 1, texts
    assert not any("lunch" in t for t in texts)

    # One channel log for all threads; a thread's lines say which thread they are in.
    lines = [json.loads(line) for line in (workdir / ops / "log.jsonl").read_text().splitlines()]
    assert [(line["user"], line["text"], line.get("thread_ts")) for line in lines] == [
        (carol, "@mom find the logs", None),
        ("bot", "On it.", asked),
        (dave, "they are in /var/log/app", asked),
        ("bot", "Noted.", asked),
        (dave, "unrelated: lunch at noon?", None),
        (carol, "@mom what did dave say?", asked),
        ("bot", "Dave said /var/log/app.", asked),
    ]
    assert list(lines[2]) == [
        "date", "ts", "thread_ts", "user", "userName", "displayName", "text", "attachments", "isBot"
    ]  # fmt: skip
