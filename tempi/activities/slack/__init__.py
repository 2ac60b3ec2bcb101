"""The Slack gateway's activities: Web API calls and the agent session a conversation drives."""

from tempi.activities.slack.activities import SlackActivities

__all__ = ["SlackActivities"]
