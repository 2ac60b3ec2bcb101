"""`tempi slack WORKING_DIR`: run the gateway and the Slack conversations' worker until Ctrl+C."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tempi.agent.model_spec import THINKING_LEVELS
from tempi.agent.tools.attach import ATTACH_TOOL
from tempi.cli.errors import UserError
from tempi.cli.runtime import open_runtime
from tempi.slack.access import Access, parse_names

# A token Slack refuses: a supervisor should not restart the bot until someone sets another.
EXIT_BAD_TOKEN = 2

SLACK_PROMPT = (
    "You are mom, answering people in Slack. Write Slack mrkdwn: *bold*, _italic_, `code`, "
    "<url|text> for links; mention people as <@USERID>. Keep answers short; your work happens "
    "in the working directory."
)

DESCRIPTION = """\
Run pi's Slack bot (mom) on Temporal: every mention of the bot in a channel, and every
direct message, starts a run of a coding agent whose session is a pi file under
WORKING_DIR (<channel>/threads/<thread ts>/context.jsonl, or <channel>/context.jsonl with
--context channel and for a direct message's top level). Every channel message (the bot's
answers too) goes to WORKING_DIR/<channel>/log.jsonl in mom's format, attachments to
<channel>/attachments/. Runs are durable: a restarted gateway carries on where it stopped.

WORKING_DIR/events/*.json wake the bot as in mom (immediate, one-shot at a time, periodic on a
cron in a time zone); Temporal keeps them, so a wake-up set before a crash still fires
if a gateway is back within TEMPI_SLACK_EVENT_GRACE of its time; one missed by more is not
run late (a past one-shot is deleted, a periodic event waits for its next time), as in mom.
WORKING_DIR/<channel>/settings.json may set that channel's defaultProvider, defaultModel and
defaultThinkingLevel. In thread mode, a plain reply in the bot's thread steers the run going
there, or starts a follow-up run when none is; a thread's first run sees what the channel
said since the bot last spoke there; a thread under the bot's DM answer or event report
continues that conversation. Messages that wait behind a run: events silently, a person
told once per run. A token Slack refuses ends tempi slack with exit status 2 (docs/slack.md).

environment:
  MOM_SLACK_APP_TOKEN   app-level token (xapp-…, scope connections:write) for Socket Mode
                        (SLACK_APP_TOKEN also works)
  MOM_SLACK_BOT_TOKEN   bot token (xoxb-…) for the Web API (SLACK_BOT_TOKEN also works)
  TEMPI_SLACK_API_URL   Web API base URL (default https://slack.com/api/)
  TEMPI_SLACK_IDLE_CLOSE
                        seconds after which an idle conversation closes (its workflow and
                        its session's; the next message continues it from its file);
                        default 3600, 0 keeps conversations open
  TEMPI_SLACK_EVENT_GRACE
                        seconds an events/ wake-up may still run after its time when no
                        gateway ran then (default 60)
  TEMPORAL_ADDRESS      a Temporal server to use instead of tempi's background service
  model API keys as for `tempi` (ANTHROPIC_API_KEY, OPENAI_API_KEY, models.json, ...)
"""


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="tempi slack", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "working_dir", metavar="WORKING_DIR", nargs="?", help="where channels' sessions and files live"
    )
    p.add_argument(
        "--download",
        metavar="CHANNEL",
        help="print the channel's whole history with its threads (needs only the bot token) and exit",
    )
    p.add_argument(
        "--context",
        choices=["thread", "channel"],
        default="thread",
        help="one session per thread (default) or one per channel",
    )
    p.add_argument(
        "--sandbox",
        help="where tools run: host (this machine; also called local), bwrap, docker, docker:IMAGE, or container:NAME, your own running "
        "container that mounts WORKING_DIR and keeps what tools install (mom's docker:NAME; "
        "e.g. `docker run -d --name NAME -v WORKING_DIR:/workspace alpine sleep infinity`) (default local)",
    )
    p.add_argument(
        "-e",
        "--extension",
        action="append",
        default=[],
        metavar="PATH",
        help="a Python extension every session loads (repeatable), besides those in "
        "~/.tempi/extensions/ and WORKING_DIR/.tempi/extensions/",
    )
    p.add_argument(
        "-ne", "--no-extensions", action="store_true", help="load only the extensions given with --extension"
    )
    p.add_argument(
        "--trust",
        action="store_true",
        help="use WORKING_DIR/.tempi/ (its extensions, MCP servers, sessionDir and shell settings) as it is "
        "now; without it tempi slack leaves them out (the bot never trusts a repository by itself)",
    )
    p.add_argument("--provider", help="model provider for new sessions")
    p.add_argument("--model", help="model id or provider/id for new sessions")
    p.add_argument("--thinking", choices=THINKING_LEVELS, help="thinking level for new sessions")
    p.add_argument(
        "--allow-users",
        metavar="USERS",
        help="comma-separated user ids or names who may use the bot (default: anyone in its channels)",
    )
    p.add_argument(
        "--allow-channels",
        metavar="CHANNELS",
        help="comma-separated channel ids or names (DMs by their D… id) where the bot answers (default: all)",
    )
    p.add_argument(
        "--admins",
        metavar="USERS",
        help="comma-separated user ids or names who may `stop` other people's runs (default: everyone)",
    )
    return p.parse_args(argv)


def access_of(args: argparse.Namespace) -> Access:
    return Access(
        users=parse_names(args.allow_users),
        channels=parse_names(args.allow_channels),
        admins=parse_names(args.admins),
    )


def _session_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--append-system-prompt", SLACK_PROMPT]
    for flag in ("provider", "model", "thinking", "sandbox"):
        value = getattr(args, flag)
        if value:
            argv += [f"--{flag}", value]
    for path in args.extension:
        argv += ["--extension", str(Path(path).expanduser().resolve())]
    if args.no_extensions:
        argv.append("--no-extensions")
    if args.trust:
        argv.append("--trust")
    return argv


async def cmd_slack(argv: list[str]) -> int:
    args = parse(argv)
    from tempi.activities.slack.web_client import SlackTokensMissing, app_token, web_client

    if args.download:
        return await _download(args.download)
    if not args.working_dir:
        raise UserError(
            "Give `tempi slack` a WORKING_DIR, or --download CHANNEL to print a channel's history."
        )
    from tempi.cli.args import parse_args
    from tempi.cli.plan import plan_run

    try:
        app_token()
        web = web_client()
    except SlackTokensMissing as err:
        raise UserError(str(err)) from err
    working_dir = Path(args.working_dir).expanduser().resolve()
    working_dir.mkdir(parents=True, exist_ok=True)
    planned = plan_run(parse_args(_session_argv(args)), working_dir)
    # mom's attach: the tool names a file, the conversation workflow uploads it.
    planned.options.tools = [*planned.options.tools, ATTACH_TOOL]
    # mom's tools all take a `label`, which the main message shows as `_→ label_`.
    planned.options.tool_labels = True

    from tempi.slack.token_check import BadSlackToken, check_tokens

    try:
        await check_tokens()
    except BadSlackToken as err:
        print(f"tempi slack: {err}", file=sys.stderr)
        return EXIT_BAD_TOKEN
    from tempi.activities.slack import SlackActivities
    from tempi.activities.slack.event_delivery import deliver
    from tempi.client import SessionService
    from tempi.config.paths import default_sessions_root
    from tempi.slack.gateway import SlackGateway
    from tempi.store.session_store import SessionStore
    from tempi.workers.worker import build_slack_worker
    from tempi.workflows.slack_types import slack_task_queue

    async with open_runtime(quiet=True) as rt:
        service = SessionService(rt.client, SessionStore(default_sessions_root()))
        activities = SlackActivities(service, planned.options, web)
        async with build_slack_worker(
            rt.client, slack_task_queue(str(working_dir)), [*activities.all(), deliver]
        ):
            gateway = SlackGateway(rt.client, web, str(working_dir), args.context, access_of(args))
            try:
                await gateway.run()
            except asyncio.CancelledError:
                print("tempi slack: stopped", file=sys.stderr)
    return 0


async def _download(channel: str) -> int:
    from tempi.activities.slack.web_client import SlackTokensMissing, web_client
    from tempi.slack.download import download_channel
    from tempi.slack.token_check import BadSlackToken, check_bot_token

    try:
        web = web_client()
        await check_bot_token()
    except SlackTokensMissing as err:
        raise UserError(str(err)) from err
    except BadSlackToken as err:
        print(f"tempi slack: {err}", file=sys.stderr)
        return EXIT_BAD_TOKEN
    from slack_sdk.errors import SlackApiError

    try:
        await download_channel(web, channel, sys.stdout)
    except SlackApiError as err:
        code = err.response.get("error")
        raise UserError(
            f"Slack answered {code} for channel {channel}: give a channel id (C…, G… or D…) the bot is in."
        ) from err
    return 0
