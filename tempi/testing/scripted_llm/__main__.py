"""`python -m tempi.testing.scripted_llm`: serve scripted scenarios until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from tempi.testing.scripted_llm.scenario import Scenario, ScenarioError, load_scenarios
from tempi.testing.scripted_llm.server import ScriptedLLMServer
from tempi.testing.scripted_llm.wire import API_NAMES

_FORMAT_HELP = """\
scenario files:
  X.json is served as scenario X. It holds either a JSON list of turns, or an object
  {"turns": [...], "select": "assistant_count" | "sequential", "summary": "..."}.
  A list selects turns by assistant_count: the turn served is the number of assistant
  messages already in the request. "sequential" serves turns in arrival order instead.
  A request whose last user message contains <conversation> is a compaction summary
  call and is answered with "summary".

turn fields (all optional):
  text, thinking                      streamed in chunks of chunk_size characters (8)
  tool_calls: [{name, arguments, id?}] arguments is a JSON object
  overflow: true                      answer with the provider's context-overflow error
  fail_times, fail_status, retry_after fail N times (HTTP 500, or 429/529...) first
  usage: {input, output, cacheRead, cacheWrite}   defaults 100 / 20 / 0 / 0
  stop_reason: "length"               end as if max tokens were reached
  chunk_delay_ms, first_chunk_delay_ms pauses between SSE events
  drop_after_chunks, drop_times       cut the connection after N events, drop_times times

endpoints (base URL for the SDKs in brackets):
  POST /s/<scenario>/v1/chat/completions   openai-completions  [.../s/<scenario>/v1]
  POST /s/<scenario>/v1/responses          openai-responses    [.../s/<scenario>/v1]
  POST /s/<scenario>/v1/messages           anthropic-messages  [.../s/<scenario>]
  POST /s/<scenario>/v1beta/models/<model>:streamGenerateContent?alt=sse
                                           google-generative-ai [.../s/<scenario>/v1beta]
  POST /s/<scenario>/v1/publishers/google/models/<model>:streamGenerateContent?alt=sse
                                           google-vertex       [.../s/<scenario>]
  POST /s/<scenario>/token                 OAuth token exchange (Vertex ADC token_url)
  GET  /health
"""


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tempi.testing.scripted_llm",
        description="Serve scripted LLM answers over the OpenAI and Anthropic wire protocols.",
        epilog=_FORMAT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8787, help="port to listen on, 0 for any free port (default 8787)"
    )
    parser.add_argument(
        "--scenarios",
        type=Path,
        action="append",
        required=True,
        metavar="DIR_OR_FILE",
        help="a scenario .json file or a directory of them; may be given more than once",
    )
    parser.add_argument(
        "--record", type=Path, metavar="FILE.jsonl", help="append every request received to this file"
    )
    return parser.parse_args(argv)


def _print_urls(server: ScriptedLLMServer) -> None:
    print(f"scripted LLM server at {server.base_url}")
    for name in server.scenario_names:
        print(f"  {name}")
        for api in API_NAMES:
            print(f"    {api:<20} {server.url_for(name, api)}")
    sys.stdout.flush()


async def _serve(server: ScriptedLLMServer) -> None:
    await server.start()
    _print_urls(server)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    try:
        await stopped.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    scenarios: dict[str, Scenario] = {}
    try:
        for path in args.scenarios:
            scenarios.update(load_scenarios(path))
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not scenarios:
        print(
            "error: no scenario files (*.json) found in " + ", ".join(map(str, args.scenarios)),
            file=sys.stderr,
        )
        return 2
    server = ScriptedLLMServer(scenarios, host=args.host, port=args.port, record_path=args.record)
    try:
        asyncio.run(_serve(server))
    except OSError as err:
        print(f"error: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
