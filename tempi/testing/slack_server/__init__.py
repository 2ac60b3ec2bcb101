"""A scripted Slack server for tests and manual runs.

It speaks the Web API methods mom uses and Socket Mode, so the official slack_sdk clients
talk to it as to Slack, and lets a test act as the workspace's people (control.py).
"""

from tempi.testing.slack_server.control import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, Attachment, SlackControl
from tempi.testing.slack_server.holds import Hold
from tempi.testing.slack_server.records import ApiCall, BotAction, BotMessage
from tempi.testing.slack_server.server import ScriptedSlackServer
from tempi.testing.slack_server.socket_mode import Delivery

__all__ = [
    "DEFAULT_APP_TOKEN",
    "DEFAULT_BOT_TOKEN",
    "ApiCall",
    "Attachment",
    "BotAction",
    "BotMessage",
    "Delivery",
    "Hold",
    "ScriptedSlackServer",
    "SlackControl",
]
