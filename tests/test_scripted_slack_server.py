"""The scripted Slack server behaves like Slack where slack_sdk (and so the gateway) relies on it.

Every test drives it with the official clients: `AsyncWebClient(base_url=...)` and the aiohttp
`SocketModeClient`, exactly as `tempi slack` will.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tempi.testing.slack_server import Attachment, ScriptedSlackServer


@dataclass
class Inbox:
    """What one Socket Mode client received."""

    requests: list[SocketModeRequest] = field(default_factory=list)

    def events(self) -> list[dict]:
        return [r.payload["event"] for r in self.requests if r.type == "events_api"]

    def human_events(self) -> list[dict]:
        # The bot's own posts come back as events too (as in Slack); these are the rest.
        return [
            e
            for e in self.events()
            if "bot_id" not in e and e.get("subtype") not in ("message_changed", "message_deleted")
        ]


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def web_client(slack: ScriptedSlackServer, **kwargs: object) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url, **kwargs)  # type: ignore[arg-type]


@asynccontextmanager
async def socket_client(slack: ScriptedSlackServer, ack: bool = True) -> AsyncIterator[Inbox]:
    inbox = Inbox()
    client = SocketModeClient(app_token=slack.app_token, web_client=web_client(slack), ping_interval=1)

    async def on_request(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        inbox.requests.append(request)
        if ack:
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))

    client.socket_mode_request_listeners.append(on_request)
    await client.connect()
    try:
        yield inbox
    finally:
        await client.close()


async def test_channel_mention_arrives_as_app_mention_and_message_and_acked_is_not_redelivered() -> None:
    async with ScriptedSlackServer(ack_timeout=0.3) as slack:
        alice = slack.add_user("alice")
        general = slack.add_channel("general", members=[alice])
        async with socket_client(slack) as inbox:
            await slack.wait_for_connections()
            ts = slack.user_says(alice, general, f"<@{slack.bot_user_id}> list the files")
            await eventually(lambda: len(inbox.events()) == 2)
            await slack.idle()
            await asyncio.sleep(0.5)  # longer than the ack timeout: nothing more may come

        events = inbox.events()
        assert sorted(e["type"] for e in events) == ["app_mention", "message"]
        message = next(e for e in events if e["type"] == "message")
        mention = next(e for e in events if e["type"] == "app_mention")
        assert message["channel_type"] == "channel" and "channel_type" not in mention
        for event in events:
            assert (event["channel"], event["ts"], event["user"]) == (general, ts, alice)
            assert event["text"] == f"<@{slack.bot_user_id}> list the files"
        payload = inbox.requests[0].payload
        assert payload["type"] == "event_callback" and payload["event_id"].startswith("Ev")
        assert isinstance(payload["event_time"], int)
        assert [r.retry_attempt for r in inbox.requests] == [0, 0]
        assert (slack.acks, slack.redeliveries) == (2, 0)


async def test_unacked_envelope_is_redelivered_with_retry_attempt_up_to_three_times() -> None:
    async with ScriptedSlackServer(ack_timeout=0.2) as slack:
        alice = slack.add_user("alice")
        dm = slack.open_dm(alice)
        async with socket_client(slack, ack=False) as inbox:
            await slack.wait_for_connections()
            slack.user_says(alice, dm, "hello?")
            await slack.idle()

        attempts = [(r.payload["event_id"], r.retry_attempt, r.retry_reason) for r in inbox.requests]
        event_id = attempts[0][0]
        assert attempts == [
            (event_id, 0, ""),
            (event_id, 1, "timeout"),
            (event_id, 2, "timeout"),
            (event_id, 3, "timeout"),
        ]
        # Each delivery is its own envelope; the event id is what stays the same.
        assert len({r.envelope_id for r in inbox.requests}) == 4
        assert (slack.acks, slack.redeliveries) == (0, 3)


async def test_dm_arrives_as_message_im_only() -> None:
    async with ScriptedSlackServer() as slack:
        bob = slack.add_user("bob")
        dm = slack.open_dm(bob)
        async with socket_client(slack) as inbox:
            await slack.wait_for_connections()
            slack.user_says(bob, dm, f"<@{slack.bot_user_id}> hi without needing a mention")
            await eventually(lambda: len(inbox.events()) == 1)
            await slack.idle()
        (event,) = inbox.events()
        assert event["type"] == "message" and event["channel_type"] == "im" and event["channel"] == dm


async def test_post_then_update_keeps_one_message_with_the_new_text() -> None:
    async with ScriptedSlackServer() as slack:
        general = slack.add_channel("general")
        client = web_client(slack)
        posted = await client.chat_postMessage(channel=general, text="_Thinking_ ...")
        updated = await client.chat_update(channel=general, ts=posted["ts"], text="the answer")
        assert updated["ts"] == posted["ts"] and updated["message"]["text"] == "the answer"

        history = await client.conversations_history(channel=general)
        assert [(m["ts"], m["text"]) for m in history["messages"]] == [(posted["ts"], "the answer")]
        assert history["messages"][0]["bot_id"] and history["messages"][0]["edited"]
        (message,) = slack.bot_messages(general)
        assert message.texts == ["_Thinking_ ...", "the answer"] and not message.deleted
        assert [a.kind for a in slack.actions] == ["post", "update"]

        await client.chat_delete(channel=general, ts=posted["ts"])
        assert (await client.conversations_history(channel=general))["messages"] == []
        with pytest.raises(SlackApiError) as refused:
            await client.chat_update(channel=general, ts=posted["ts"], text="again")
        assert refused.value.response["error"] == "message_not_found"


async def test_bot_cannot_edit_a_users_message_or_post_where_it_is_not() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        general = slack.add_channel("general", members=[alice])
        elsewhere = slack.add_channel("elsewhere", members=[alice], bot_is_member=False)
        ts = slack.user_says(alice, general, "mine")
        client = web_client(slack)
        with pytest.raises(SlackApiError) as edit:
            await client.chat_update(channel=general, ts=ts, text="theirs")
        with pytest.raises(SlackApiError) as post:
            await client.chat_postMessage(channel=elsewhere, text="hi")
        assert (edit.value.response["error"], post.value.response["error"]) == (
            "cant_update_message",
            "not_in_channel",
        )


async def test_thread_posts_appear_in_replies_not_in_history() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        general = slack.add_channel("general", members=[alice])
        root = slack.user_says(alice, general, f"<@{slack.bot_user_id}> do it")
        client = web_client(slack)
        reply = await client.chat_postMessage(channel=general, text="*✓ bash*: list files", thread_ts=root)
        follow_up = slack.user_says(alice, general, "thanks", thread_ts=reply["ts"])

        thread = await client.conversations_replies(channel=general, ts=root)
        assert [m["ts"] for m in thread["messages"]] == [root, reply["ts"], follow_up]
        assert all(m["thread_ts"] == root for m in thread["messages"])
        history = await client.conversations_history(channel=general)
        (parent,) = history["messages"]
        assert parent["ts"] == root and parent["reply_count"] == 2 and parent["latest_reply"] == follow_up


async def test_history_pages_newest_first_with_cursors_and_bounds() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        general = slack.add_channel("general", members=[alice])
        sent = [slack.user_says(alice, general, f"message {n}") for n in range(25)]
        client = web_client(slack)

        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await client.conversations_history(channel=general, limit=10, cursor=cursor)
            pages += 1
            seen += [m["ts"] for m in page["messages"]]
            cursor = page["response_metadata"]["next_cursor"]
            assert page["has_more"] == bool(cursor)
            if not cursor:
                break
        assert pages == 3 and seen == list(reversed(sent))

        after = await client.conversations_history(channel=general, oldest=sent[20], inclusive=False)
        assert [m["ts"] for m in after["messages"]] == list(reversed(sent[21:]))
        including = await client.conversations_history(
            channel=general, oldest=sent[20], latest=sent[22], inclusive=True
        )
        assert [m["ts"] for m in including["messages"]] == list(reversed(sent[20:23]))
        with pytest.raises(SlackApiError) as bad:
            await client.conversations_history(channel=general, cursor="bm9wZQ==")
        assert bad.value.response["error"] == "invalid_cursor"


async def test_users_and_conversations_list_page_as_mom_reads_them_at_start() -> None:
    async with ScriptedSlackServer() as slack:
        users = [slack.add_user(f"user{n}") for n in range(4)]
        gone = slack.add_user("gone", deleted=True)
        public = slack.add_channel("general", members=users)
        private = slack.add_channel("secret", members=users[:1], private=True)
        slack.add_channel("hidden", private=True, bot_is_member=False)
        dm = slack.open_dm(users[0])
        client = web_client(slack)

        who = await client.auth_test()
        assert who["user_id"] == slack.bot_user_id and who["bot_id"]

        members: list[dict] = []
        cursor = None
        while True:
            page = await client.users_list(limit=2, cursor=cursor)
            members += page["members"]
            cursor = page["response_metadata"]["next_cursor"]
            if not cursor:
                break
        assert {m["id"] for m in members} == {*users, gone, slack.bot_user_id}
        assert next(m for m in members if m["id"] == gone)["deleted"] is True

        channels = await client.conversations_list(
            types="public_channel,private_channel", exclude_archived=True
        )
        assert {c["id"] for c in channels["channels"]} == {public, private}
        ims = await client.conversations_list(types="im")
        assert [(c["id"], c["user"]) for c in ims["channels"]] == [(dm, users[0])]
        info = await client.conversations_info(channel=public)
        assert info["channel"]["name"] == "general" and info["channel"]["is_member"] is True


async def test_429_is_retried_after_retry_after_with_the_retry_handler_and_raised_without() -> None:
    async with ScriptedSlackServer() as slack:
        general = slack.add_channel("general")
        slack.rate_limit("chat.postMessage", times=1, retry_after=1)
        patient = web_client(slack, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
        posted = await patient.chat_postMessage(channel=general, text="after the wait")
        refused, served = slack.calls("chat.postMessage")
        assert (refused.status, refused.error, served.status) == (429, "ratelimited", 200)
        assert served.at - refused.at >= 1.0
        assert posted["message"]["text"] == "after the wait"

        slack.rate_limit("chat.update", times=1, retry_after=7)
        with pytest.raises(SlackApiError) as limited:
            await web_client(slack).chat_update(channel=general, ts=posted["ts"], text="x")
        assert limited.value.response.status_code == 429
        assert limited.value.response["error"] == "ratelimited"
        assert limited.value.response.headers["Retry-After"] == "7"
        assert [m.texts for m in slack.bot_messages(general)] == [["after the wait"]]


async def test_three_step_upload_shares_the_file_in_the_thread() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        general = slack.add_channel("general", members=[alice])
        root = slack.user_says(alice, general, "make me a chart")
        client = web_client(slack)
        done = await client.files_upload_v2(
            channel=general, thread_ts=root, content=b"a,b\n1,2\n", filename="chart.csv", title="Chart"
        )
        file_id = done["file"]["id"]
        assert [c.method for c in slack.calls()] == [
            "files.getUploadURLExternal",
            "files.completeUploadExternal",
        ]

        thread = await client.conversations_replies(channel=general, ts=root)
        shared = thread["messages"][-1]
        assert shared["subtype"] == "file_share" and shared["user"] == slack.bot_user_id
        (file,) = shared["files"]
        assert (file["id"], file["name"], file["title"]) == (file_id, "chart.csv", "Chart")
        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": f"Bearer {slack.bot_token}"}
            async with http.get(file["url_private_download"], headers=headers) as response:
                assert await response.read() == b"a,b\n1,2\n"


async def test_url_private_download_needs_the_bot_token() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        dm = slack.open_dm(alice)
        async with socket_client(slack) as inbox:
            await slack.wait_for_connections()
            slack.user_says(alice, dm, "look", files=[Attachment("shot.png", b"\x89PNG-bytes")])
            await eventually(lambda: len(inbox.events()) == 1)
        (event,) = inbox.events()
        assert event["subtype"] == "file_share"
        (file,) = event["files"]
        assert file["mimetype"] == "image/png"
        url = file["url_private_download"]
        async with aiohttp.ClientSession() as http:
            async with http.get(url, allow_redirects=False) as bare:
                assert bare.status == 302
            async with http.get(url) as followed:
                assert b"PNG" not in await followed.read() and followed.content_type == "text/html"
            async with http.get(url, headers={"Authorization": f"Bearer {slack.app_token}"}) as wrong:
                assert wrong.content_type == "text/html"
            async with http.get(url, headers={"Authorization": f"Bearer {slack.bot_token}"}) as good:
                assert await good.read() == b"\x89PNG-bytes"


async def test_tokens_are_checked_per_method() -> None:
    async with ScriptedSlackServer() as slack:
        errors = []
        for client, call in (
            (web_client(slack), lambda c: c.apps_connections_open(app_token=slack.bot_token)),
            (AsyncWebClient(token=slack.app_token, base_url=slack.api_url), lambda c: c.auth_test()),
            (AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url), lambda c: c.auth_test()),
            (AsyncWebClient(base_url=slack.api_url), lambda c: c.auth_test()),
        ):
            with pytest.raises(SlackApiError) as failed:
                await call(client)
            errors.append(failed.value.response["error"])
        assert errors == ["not_allowed_token_type", "not_allowed_token_type", "invalid_auth", "not_authed"]
        opened = await web_client(slack).apps_connections_open(app_token=slack.app_token)
        assert opened["url"].startswith("ws://")


async def test_a_revoked_token_and_an_outage_answer_as_slack_does() -> None:
    async with ScriptedSlackServer() as slack:
        slack.fail("auth.test", times=1, status=503)
        with pytest.raises(SlackApiError) as failed:
            await web_client(slack, retry_handlers=[]).auth_test()
        assert failed.value.response.status_code == 503
        assert failed.value.response["error"] == "service_unavailable"
        assert (await web_client(slack).auth_test())["ok"]
        slack.revoke(slack.app_token)
        with pytest.raises(SlackApiError) as failed:
            await web_client(slack).apps_connections_open(app_token=slack.app_token)
        assert failed.value.response["error"] == "token_revoked"


async def test_text_over_40000_characters_is_truncated() -> None:
    async with ScriptedSlackServer() as slack:
        general = slack.add_channel("general")
        posted = await web_client(slack).chat_postMessage(channel=general, text="x" * 40_010)
        assert len(posted["message"]["text"]) == 40_000
        assert len(slack.bot_messages(general)[0].text) == 40_000


async def test_disconnect_makes_the_client_reconnect_and_keep_receiving() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        dm = slack.open_dm(alice)
        async with socket_client(slack) as inbox:
            await slack.wait_for_connections()
            assert await slack.disconnect(reason="refresh_requested") == 1
            await eventually(lambda: slack.connections_opened == 2 and slack.hub.open_connections == 1)
            slack.user_says(alice, dm, "still there?")
            await eventually(lambda: len(inbox.human_events()) == 1)
            await slack.idle()
        assert inbox.human_events()[0]["text"] == "still there?"
        assert [d.retry_attempt for d in slack.deliveries] == [0]


async def test_envelopes_are_spread_over_open_connections() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        dm = slack.open_dm(alice)
        async with socket_client(slack) as first, socket_client(slack) as second:
            await slack.wait_for_connections(2)
            for n in range(6):
                slack.user_says(alice, dm, f"message {n}")
            await eventually(lambda: len(first.events()) + len(second.events()) == 6)
            await slack.idle()
        assert first.events() and second.events()
        assert sorted(e["text"] for e in first.events() + second.events()) == [
            f"message {n}" for n in range(6)
        ]


async def test_an_envelope_one_connection_leaves_unacked_is_redelivered_to_another() -> None:
    # Two gateways, one of them stuck: Slack retries an event on the app's other connection.
    async with ScriptedSlackServer(ack_timeout=0.3) as slack:
        alice = slack.add_user("alice")
        dm = slack.open_dm(alice)
        async with socket_client(slack, ack=False) as stuck, socket_client(slack) as live:
            await slack.wait_for_connections(2)
            for n in range(4):
                slack.user_says(alice, dm, f"message {n}")
                await slack.idle()
        assert stuck.events()  # some first attempts went to the stuck connection
        assert sorted(e["text"] for e in live.events()) == [f"message {n}" for n in range(4)]
        assert slack.hub.given_up == [] and slack.acks == 4
        retried = [r for r in live.requests if r.retry_attempt]
        assert [r.retry_attempt for r in retried] == [1] * len(stuck.requests)


async def test_bot_posts_come_back_as_bot_events() -> None:
    async with ScriptedSlackServer() as slack:
        general = slack.add_channel("general")
        async with socket_client(slack) as inbox:
            await slack.wait_for_connections()
            client = web_client(slack)
            posted = await client.chat_postMessage(channel=general, text="hi")
            await client.chat_update(channel=general, ts=posted["ts"], text="hello")
            await eventually(lambda: len(inbox.events()) == 2)
        echo, changed = inbox.events()
        assert echo["bot_id"] and echo["user"] == slack.bot_user_id and echo["ts"] == posted["ts"]
        assert changed["subtype"] == "message_changed" and changed["message"]["text"] == "hello"


def test_runs_as_a_process_driven_over_the_control_api() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tempi.testing.slack_server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().split(" at ")[1].strip()

        def control(action: str, body: dict) -> dict:
            request = urllib.request.Request(
                f"{base_url}/_control/{action}", data=json.dumps(body).encode(), method="POST"
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())

        info = control("info", {})
        user = control("add_user", {"name": "alice"})["user"]
        channel = control("add_channel", {"name": "general", "members": [user]})["channel"]
        ts = control("user_says", {"user": user, "channel": channel, "text": "hello"})["ts"]

        async def read_history() -> dict:
            client = AsyncWebClient(token=info["bot_token"], base_url=info["api_url"])
            await client.chat_postMessage(channel=channel, text="hi alice")
            return (await client.conversations_history(channel=channel)).data  # type: ignore[return-value]

        history = asyncio.run(read_history())
        assert [m["text"] for m in history["messages"]] == ["hi alice", "hello"]
        assert history["messages"][1]["ts"] == ts
        (posted,) = control("bot_messages", {"channel": channel})["messages"]
        assert posted["texts"] == ["hi alice"]
        # No Socket Mode client is connected, so alice's message is still waiting to be delivered.
        assert control("deliveries", {}) == {"deliveries": [], "acks": 0, "redeliveries": 0}
    finally:
        process.terminate()
        process.wait(10)


async def test_metadata_comes_back_only_when_asked_for_in_history_and_replies() -> None:
    async with ScriptedSlackServer() as slack:
        alice = slack.add_user("alice")
        chan = slack.add_channel("general", members=[alice])
        web = web_client(slack)
        meta = {"event_type": "tempi_post", "event_payload": {"key": "k1"}}
        top = await web.chat_postMessage(channel=chan, text="top", metadata=meta)
        assert top["message"]["metadata"] == meta
        await web.chat_postMessage(channel=chan, text="reply", thread_ts=top["ts"], metadata=meta)
        plain = await web.conversations_history(channel=chan)
        assert "metadata" not in plain["messages"][0]
        history = await web.conversations_history(channel=chan, include_all_metadata=True)
        assert history["messages"][0]["metadata"] == meta
        replies = await web.conversations_replies(channel=chan, ts=top["ts"], include_all_metadata=True)
        assert [m["metadata"] for m in replies["messages"]] == [meta, meta]
        with pytest.raises(SlackApiError) as bad:
            await web.chat_postMessage(channel=chan, text="x", metadata={"event_type": "t"})
        assert bad.value.response["error"] == "invalid_metadata_schema"


@pytest.mark.parametrize("applied", [True, False])
async def test_a_held_post_is_done_or_lost_while_its_caller_waits(applied: bool) -> None:
    async with ScriptedSlackServer() as slack:
        chan = slack.add_channel("general")
        web = web_client(slack, timeout=30)
        hold = slack.hold("chat.postMessage", lambda args: args.get("text") == "held", applied=applied)
        call = asyncio.ensure_future(web.chat_postMessage(channel=chan, text="held"))
        await asyncio.wait_for(hold.reached.wait(), 10)
        assert not call.done()
        assert [m.text for m in slack.bot_messages(chan)] == (["held"] if applied else [])
        # Only the matching call is held, and only once.
        await web.chat_postMessage(channel=chan, text="other")
        hold.release()
        if applied:
            assert (await call)["ok"]
        else:
            with pytest.raises(SlackApiError):
                await call
        assert [m.text for m in slack.bot_messages(chan)] == (["held", "other"] if applied else ["other"])
