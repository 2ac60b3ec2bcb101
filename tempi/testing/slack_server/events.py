"""Event callbacks as Slack's Events API emits them for what happens in the workspace."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from tempi.testing.slack_server.workspace import EVENT_CHANNEL_TYPES, Message, Workspace

_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


def mentions(text: str) -> set[str]:
    return set(_MENTION.findall(text))


def rich_text_blocks(text: str) -> list[dict[str, Any]]:
    """The `blocks` Slack's clients attach to a typed message (mentions as user elements)."""
    elements: list[dict[str, Any]] = []
    position = 0
    for match in _MENTION.finditer(text):
        if match.start() > position:
            elements.append({"type": "text", "text": text[position : match.start()]})
        elements.append({"type": "user", "user_id": match.group(1)})
        position = match.end()
    if position < len(text):
        elements.append({"type": "text", "text": text[position:]})
    return [
        {
            "type": "rich_text",
            "block_id": uuid.uuid4().hex[:5],
            "elements": [{"type": "rich_text_section", "elements": elements}],
        }
    ]


def event_callback(workspace: Workspace, event: dict[str, Any]) -> dict[str, Any]:
    """Wrap an event in the callback Socket Mode carries as an envelope's payload."""
    return {
        "token": "scripted-verification-token",
        "team_id": workspace.team_id,
        "context_team_id": workspace.team_id,
        "api_app_id": workspace.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": workspace.ids.make("Ev"),
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": workspace.team_id,
                "user_id": workspace.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-" + uuid.uuid4().hex,
    }


def user_message_events(workspace: Workspace, message: Message) -> list[dict[str, Any]]:
    """What the bot receives for a human's message: `app_mention` first when it is mentioned
    in a channel (Slack sends it besides the `message`), only `message` in a DM."""
    channel = workspace.channels[message.channel]
    if workspace.bot_user_id not in channel.members:
        return []
    body = workspace.message_to_slack(message, with_channel=True)
    body["blocks"] = rich_text_blocks(message.text)
    body["event_ts"] = message.ts
    events: list[dict[str, Any]] = []
    if channel.kind != "im" and workspace.bot_user_id in mentions(message.text):
        mention = {
            key: value for key, value in body.items() if key not in ("subtype", "upload", "display_as_bot")
        }
        mention["type"] = "app_mention"
        events.append(mention)
    events.append({**body, "channel_type": EVENT_CHANNEL_TYPES[channel.kind]})
    return events


def bot_message_event(workspace: Workspace, message: Message) -> dict[str, Any]:
    """The `message` event Slack also sends an app for its own posts (gateways must skip it)."""
    channel = workspace.channels[message.channel]
    body = workspace.message_to_slack(message, with_channel=True)
    body["event_ts"] = message.ts
    body["channel_type"] = EVENT_CHANNEL_TYPES[channel.kind]
    return body


def message_changed_event(workspace: Workspace, message: Message, previous_text: str) -> dict[str, Any]:
    channel = workspace.channels[message.channel]
    current = workspace.message_to_slack(message)
    previous = {**current, "text": previous_text}
    previous.pop("edited", None)
    event_ts = workspace.clock.next()
    return {
        "type": "message",
        "subtype": "message_changed",
        "message": current,
        "previous_message": previous,
        "channel": message.channel,
        "hidden": True,
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": EVENT_CHANNEL_TYPES[channel.kind],
    }


def message_deleted_event(workspace: Workspace, message: Message) -> dict[str, Any]:
    channel = workspace.channels[message.channel]
    event_ts = workspace.clock.next()
    return {
        "type": "message",
        "subtype": "message_deleted",
        "previous_message": workspace.message_to_slack(message),
        "channel": message.channel,
        "hidden": True,
        "deleted_ts": message.ts,
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": EVENT_CHANNEL_TYPES[channel.kind],
    }
