"""The flags of the main `tempi` command, named and behaving as pi's."""

from __future__ import annotations

import argparse
from importlib import metadata

from tempi.agent.model_spec import THINKING_LEVELS
from tempi.agent.tool_specs import ALL_TOOLS

EXAMPLES = """\
examples:
  tempi                                                 the interactive mode (a terminal UI)
  tempi "explain this repo"                             the interactive mode, with this prompt sent
  tempi -p "fix the failing test in tests/test_api.py"
  tempi -p @src/app.py @screenshot.png "why does the button look like this?"
  cat error.log | tempi -p "what went wrong?"
  tempi -p "write the tests" "now run them"             several prompts, one after another
  tempi --mode json -p "list the files here"            pi's JSON event stream
  tempi --mode rpc                                      pi's RPC protocol on stdin/stdout
  tempi --model anthropic/claude-sonnet-4-5:high -p "..."
  tempi --continue -p "now add a docstring"             continue the latest session here
  tempi --resume -p "..."                               pick an earlier session from a list
  tempi --session 3f2a -p "..."                         continue a session by id prefix or file
  tempi --fork 3f2a -p "try another approach"           a copy of a session, continued
  tempi --no-session -p "quick question"                nothing is kept afterwards
  tempi --list-models sonnet                            models whose name matches
  tempi --export 3f2a out.html                          a session as a web page

more commands (tempi COMMAND --help):
  tempi sessions list | show ID | export ID             sessions on this machine
  tempi mcp list                                        MCP servers (mcp.json), their state and tools
  tempi attach ID                                       watch a running session live
  tempi steer ID "stop, do X instead"                   redirect it from any terminal
  tempi follow-up ID "then do Y"                        queue work for when it finishes
  tempi abort ID                                        stop its current run
  tempi stop ID                                         end its workflow (the file stays)
  tempi web                                             a browser console: every session, live, with controls
  tempi server [status|stop]                            the shared background server
  tempi worker                                          a worker for TEMPORAL_ADDRESS
  tempi codec-server                                    decrypts encrypted history for the Temporal UI/CLI
  tempi pipeline run SPEC.yaml --dry-run                a refactor spec's shards (see tempi pipeline --help)

Sessions run in Temporal workflows: closing this terminal does not stop a running session.

Files: $TEMPI_HOME (default ~/.tempi) holds models.json, settings.json, auth.json, sessions/
and AGENTS.md; those it lacks (sessions aside) are read from pi's
$PI_CODING_AGENT_DIR (default ~/.pi/agent). AGENTS.md or CLAUDE.md files from there and from
every directory between / and the working directory are added to the system prompt.

API keys, in pi's order: --api-key; auth.json (an API key, or a login made with /login, tempi's or pi's:
Claude Pro/Max, GitHub Copilot, ChatGPT Codex; shared with pi, refreshed by whichever program
finds it expired; /logout PROVIDER removes one); the provider's variable (ANTHROPIC_API_KEY,
OPENAI_API_KEY, GEMINI_API_KEY, ... as pi reads them; AWS_PROFILE etc. for Bedrock); then
models.json's apiKey. The worker that calls the model reads them at call time: auth.json and
models.json on every change, the environment as it started (with the shared background server,
`tempi server stop` makes the next command start one with the current environment).
--api-key works when this process runs the only worker itself (TEMPORAL_ADDRESS and
TEMPI_CLIENT_WORKER=1 set, no --no-worker, no other worker polling); otherwise it is refused.

Against a Temporal server of your own (TEMPORAL_ADDRESS, or a temporal.toml profile chosen
with TEMPORAL_PROFILE or TEMPORAL_CONFIG_FILE; a default profile alone is not followed),
tempi is a client: `tempi worker` processes run the sessions, and TEMPI_CLIENT_WORKER=1 makes
this process run one too (it then also runs other users' sessions on that queue).
"""


def _version() -> str:
    try:
        return metadata.version("tempi")
    except metadata.PackageNotFoundError:
        return "(version unknown: not installed as a package)"


def _sandbox_arg(value: str) -> str:
    if value == "host":
        return "local"  # mom's word for it
    kind, colon, rest = value.partition(":")
    if (
        kind not in ("local", "bwrap", "docker", "container")
        or (kind in ("local", "bwrap") and colon)
        or (kind == "container" and not rest)
    ):
        raise argparse.ArgumentTypeError(
            f"{value!r}: use local (or host), bwrap, docker, docker:IMAGE or container:NAME"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tempi",
        usage="tempi [options] [@file ...] [message ...]",
        description="tempi: a durable coding agent (pi, rebuilt on Temporal). "
        "Run bare `tempi` in a terminal for the interactive mode (with messages, they are sent in it); "
        "with -p, or with input from a pipe, it runs the prompts, prints the answer and exits.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--version", action="version", version=f"tempi {_version()}")
    p.add_argument("messages", nargs="*", help="prompts, sent one after another; @path attaches a file")
    p.add_argument(
        "-p",
        "--print",
        dest="print_mode",
        action="store_true",
        help="run the prompts, print the answer, exit",
    )
    p.add_argument(
        "--mode",
        choices=["text", "json", "rpc"],
        default="text",
        help="text: the final answer; json: pi's event stream; rpc: pi's RPC protocol on stdin/stdout",
    )
    model = p.add_argument_group("model")
    model.add_argument("--provider", help="model provider, e.g. anthropic, openai, or one from models.json")
    model.add_argument(
        "--model", help="model id or provider/id, optionally with :thinking (openai/gpt-5:high)"
    )
    model.add_argument("--api-key", help="API key for the chosen provider (see 'API keys' below)")
    model.add_argument("--thinking", choices=THINKING_LEVELS, help="thinking level")
    model.add_argument(
        "--list-models", nargs="?", const="", metavar="SEARCH", help="list models (matching SEARCH) and exit"
    )
    model.add_argument(
        "--models",
        metavar="PATTERNS",
        help="comma-separated models for Ctrl+P cycling: ids, globs (anthropic/*, *sonnet*), :thinking",
    )
    prompt = p.add_argument_group("prompt and tools")
    prompt.add_argument("--system-prompt", metavar="TEXT|FILE", help="replace tempi's system prompt")
    prompt.add_argument(
        "--append-system-prompt",
        action="append",
        default=[],
        metavar="TEXT|FILE",
        help="add to the system prompt (repeatable)",
    )
    prompt.add_argument("-t", "--tools", help=f"comma-separated tools to enable, of: {', '.join(ALL_TOOLS)}")
    prompt.add_argument("-nt", "--no-tools", action="store_true", help="no tools at all")
    prompt.add_argument(
        "-nbt",
        "--no-builtin-tools",
        action="store_true",
        help="none of the built-in tools (task, with agent definitions, stays)",
    )
    prompt.add_argument(
        "--sandbox",
        type=_sandbox_arg,
        default=None,  # None: not chosen, so resuming a running session keeps its sandbox
        metavar="local|bwrap|docker[:IMAGE]|container:NAME",
        help="where tools act: local (this machine), bwrap (no network, only the working directory "
        "writable), docker (a container per session, the working directory at /workspace; "
        "default image tempi-sandbox:latest, see deploy/sandbox/) or container:NAME (your own "
        "running container NAME, which mounts the working directory and keeps what tools install; "
        "tempi never starts, stops or removes it)",
    )
    prompt.add_argument(
        "-nc", "--no-context-files", action="store_true", help="do not add AGENTS.md / CLAUDE.md files"
    )
    prompt.add_argument(
        "--skill",
        action="append",
        default=[],
        metavar="PATH",
        help="load a skill file or directory (repeatable)",
    )
    prompt.add_argument("-ns", "--no-skills", action="store_true", help="no skills but those of --skill")
    prompt.add_argument(
        "-e",
        "--extension",
        action="append",
        default=[],
        metavar="PATH",
        help="load a Python extension module or package (repeatable)",
    )
    prompt.add_argument(
        "-ne",
        "--no-extensions",
        action="store_true",
        help="no extensions from ~/.tempi/extensions or .tempi/extensions, only those of --extension",
    )
    trust = prompt.add_mutually_exclusive_group()
    trust.add_argument(
        "--trust",
        dest="trust",
        action="store_const",
        const=True,
        default=None,
        help="trust this repository's .tempi/ (its extensions, MCP servers, sessionDir and shell "
        "settings) as it is now, and remember that; a later change to those files asks again",
    )
    trust.add_argument(
        "--no-trust",
        dest="trust",
        action="store_const",
        const=False,
        help="forget any trust given to this repository and run without its .tempi/ code and paths",
    )
    prompt.add_argument(
        "--prompt-template",
        action="append",
        default=[],
        metavar="PATH",
        help="load a prompt template file or directory (repeatable)",
    )
    prompt.add_argument(
        "-np",
        "--no-prompt-templates",
        action="store_true",
        help="no prompt templates but those of --prompt-template",
    )
    sessions = p.add_argument_group("sessions")
    sessions.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the latest session in this directory",
    )
    sessions.add_argument(
        "-r", "--resume", action="store_true", help="choose a session of this directory to continue"
    )
    sessions.add_argument(
        "--session",
        metavar="PATH|ID",
        help="continue a session by file, id or id prefix (a file not there yet: start the session in it)",
    )
    sessions.add_argument(
        "--fork", metavar="PATH|ID", help="continue a copy of a session (the original stays as it is)"
    )
    sessions.add_argument("--session-dir", metavar="DIR", help="where new session files go")
    sessions.add_argument(
        "--no-session", action="store_true", help="keep no session file (a temporary one is removed at exit)"
    )
    sessions.add_argument(
        "--export", metavar="SESSION", help="write SESSION as HTML (to the first message, if given) and exit"
    )
    p.add_argument(
        "--verbose", action="store_true", help="the startup header even when settings say quietStartup"
    )
    p.add_argument(
        "--theme",
        action="append",
        default=[],
        metavar="PATH",
        help="accepted for pi's sake and ignored: tempi's terminal UI has one built-in look",
    )
    p.add_argument("--no-themes", action="store_true", help="accepted for pi's sake (tempi has no themes)")
    p.add_argument(
        "--offline",
        action="store_true",
        help="accepted for pi's sake: tempi makes no network calls at startup (version checks, packages)",
    )
    p.add_argument(
        "--no-worker",
        action="store_true",
        help="run no worker in this process (the default against TEMPORAL_ADDRESS unless "
        "TEMPI_CLIENT_WORKER=1)",
    )
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_intermixed_args(argv)


def ignored_flags_note(args: argparse.Namespace) -> str | None:
    """One line naming the pi flags given that tempi accepts but does nothing with, and why."""
    given = [flag for flag, on in (("--theme", args.theme), ("--no-themes", args.no_themes)) if on]
    if not given:
        return None
    return f"tempi: {' and '.join(given)} ignored: tempi's terminal UI has one built-in look, no themes"
