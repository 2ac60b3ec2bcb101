"""The HTTP server: routes requests to scenarios, picks their turns and injects scripted faults."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from tempi.testing.scripted_llm.anthropic_messages import AnthropicMessagesWire
from tempi.testing.scripted_llm.azure_codex import AzureResponsesWire, CodexResponsesWire
from tempi.testing.scripted_llm.bedrock_converse import BedrockConverseWire
from tempi.testing.scripted_llm.gemini import GeminiWire
from tempi.testing.scripted_llm.mistral_chat import MistralChatWire
from tempi.testing.scripted_llm.oauth_tokens import OAuthTokenEndpoints
from tempi.testing.scripted_llm.openai_chat import OpenAIChatWire
from tempi.testing.scripted_llm.openai_responses import OpenAIResponsesWire
from tempi.testing.scripted_llm.recording import RecordedRequest, RequestLog, record_of
from tempi.testing.scripted_llm.scenario import Scenario, ScriptedTurn, coerce_scenario, load_scenarios
from tempi.testing.scripted_llm.streaming import SSE_CONTENT_TYPE, drop_connection, stream_turn, streams
from tempi.testing.scripted_llm.wire import API_NAMES, WireApi, WireError

SUMMARY_MARKER = "<conversation>"

_ROUTES: dict[str, WireApi] = {
    "/s/{scenario}/v1/chat/completions": OpenAIChatWire(),
    "/s/{scenario}/v1/responses": OpenAIResponsesWire(),
    "/s/{scenario}/v1/messages": AnthropicMessagesWire(),
    "/s/{scenario}/openai/v1/responses": AzureResponsesWire(),
    "/s/{scenario}/codex/responses": CodexResponsesWire(),
    "/s/{scenario}/mistral/v1/chat/completions": MistralChatWire(),
    # `{method}` is generateContent or streamGenerateContent (`?alt=sse`).
    "/s/{scenario}/v1beta/models/{model}:{method}": GeminiWire("google-generative-ai"),
    # Vertex AI with a custom base URL: publisher models, no project or location in the path.
    "/s/{scenario}/v1/publishers/google/models/{model}:{method}": GeminiWire("google-vertex"),
    "/s/{scenario}/model/{model_id}/converse-stream": BedrockConverseWire(),
}
# Google's OAuth token endpoint (an RFC 8693 token exchange), for Vertex ADC credentials of
# type external_account whose `token_url` points here.
TOKEN_ROUTE = "/s/{scenario}/token"


def _retry_after_header(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


class ScriptedLLMServer:
    """A local model endpoint that answers from scripted scenarios over several wire protocols."""

    def __init__(
        self,
        scenarios: Mapping[str, Scenario | list[Any] | dict[str, Any]] | None = None,
        scenarios_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: Path | None = None,
    ) -> None:
        self._scenarios: dict[str, Scenario] = load_scenarios(Path(scenarios_dir)) if scenarios_dir else {}
        for name, scenario in (scenarios or {}).items():
            self.add_scenario(name, scenario)
        self._host = host
        self._port = port
        self._log = RequestLog(record_path)
        # Per scenario: turns served so far (sequential selection); per (scenario, turn):
        # failures and dropped streams already injected.
        self._served: Counter[str] = Counter()
        self._failed: Counter[tuple[str, int]] = Counter()
        self._dropped: Counter[tuple[str, int]] = Counter()
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        # OAuth token endpoints, for logins that expire (oauth_tokens.py).
        self.oauth = OAuthTokenEndpoints()
        self._token_exchanges: list[tuple[str, dict[str, str]]] = []

    # -- scenarios and recordings ------------------------------------------------------

    def add_scenario(self, name: str, scenario: Scenario | list[Any] | dict[str, Any]) -> None:
        self._scenarios[name] = coerce_scenario(scenario, origin=f"scenario {name!r}")

    @property
    def scenario_names(self) -> list[str]:
        return sorted(self._scenarios)

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._log.requests

    def requests_for(self, scenario: str) -> list[RecordedRequest]:
        return self._log.requests_for(scenario)

    # -- addresses ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._bound_port is None:
            raise RuntimeError("the scripted LLM server is not running; call start() first")
        return f"http://{self._host}:{self._bound_port}"

    def url_for(self, scenario: str, api: str) -> str:
        if api in ("openai-completions", "openai-responses"):
            return f"{self.base_url}/s/{scenario}/v1"
        if api in ("anthropic-messages", "openai-codex-responses"):
            return f"{self.base_url}/s/{scenario}"
        if api == "azure-openai-responses":
            return f"{self.base_url}/s/{scenario}/openai/v1"
        if api == "mistral-conversations":
            return f"{self.base_url}/s/{scenario}/mistral"
        if api == "google-generative-ai":
            return f"{self.base_url}/s/{scenario}/v1beta"
        if api in ("google-vertex", "bedrock-converse-stream"):
            return f"{self.base_url}/s/{scenario}"
        raise ValueError(f"unknown api {api!r}; expected one of {', '.join(API_NAMES)}")

    def token_url_for(self, scenario: str) -> str:
        return f"{self.base_url}/s/{scenario}/token"

    def token_exchanges_for(self, scenario: str) -> list[dict[str, str]]:
        """The form fields of each token exchange asked of `scenario`'s token endpoint."""
        return [dict(fields) for name, fields in self._token_exchanges if name == scenario]

    def issued_tokens_for(self, scenario: str) -> list[str]:
        return [
            f"ya29.scripted-{scenario}-{n}" for n in range(1, len(self.token_exchanges_for(scenario)) + 1)
        ]

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for path, wire in _ROUTES.items():
            app.router.add_post(path, self._handler_for(wire))
        app.router.add_post(TOKEN_ROUTE, self._token)
        app.router.add_get("/health", self._health)
        self.oauth.register(app)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # A short shutdown timeout: a test stopping the server must not wait on slow streams.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self._bound_port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._bound_port = None

    async def __aenter__(self) -> ScriptedLLMServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def start_in_thread(self, timeout: float = 10.0) -> None:
        """Serve from a daemon thread with its own event loop, for synchronous callers."""
        if self._thread is not None:
            return
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as err:
                failure.append(err)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        thread = threading.Thread(target=serve, name="scripted-llm-server", daemon=True)
        thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the scripted LLM server did not start within {timeout} s")
        if failure:
            thread.join()
            raise failure[0]
        self._thread, self._thread_loop = thread, loop

    def stop_thread(self, timeout: float = 10.0) -> None:
        thread, loop = self._thread, self._thread_loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self._thread = self._thread_loop = None

    # -- request handling --------------------------------------------------------------

    def _handler_for(self, wire: WireApi) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(request, wire)

        return handle

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        fields = {key: str(value) for key, value in form.items()}
        if fields.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            return web.json_response(
                {"error": "invalid_grant", "error_description": "expected an RFC 8693 token exchange"},
                status=400,
            )
        name = request.match_info["scenario"]
        self._token_exchanges.append((name, fields))
        return web.json_response(
            {
                "access_token": self.issued_tokens_for(name)[-1],
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "token_type": "Bearer",
                "expires_in": 3600,
            }
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "scenarios": self.scenario_names})

    async def _not_found(self, request: web.Request) -> web.Response:
        body = {
            "error": {
                "message": f"no endpoint {request.method} {request.path}",
                "endpoints": [f"POST {path}" for path in (*_ROUTES, TOKEN_ROUTE)] + ["GET /health"],
            }
        }
        return web.json_response(body, status=404)

    async def _handle(self, request: web.Request, wire: WireApi) -> web.StreamResponse:
        received_at = time.time()
        raw = await request.read()
        record = record_of(request, wire.name, received_at)
        response = await self._respond(request, wire, record, raw)
        await self._log.finish(request, record, response)
        return response

    async def _respond(
        self, request: web.Request, wire: WireApi, record: RecordedRequest, raw: bytes
    ) -> web.StreamResponse:
        name = record.scenario
        # A wire may refuse what its real service refuses for the credentials.
        authorize = getattr(wire, "authorize", None)
        # The URL as sent: yarl would unescape `%3A`, which a signature covers.
        url = f"{request.scheme}://{request.host}{request.raw_path}"
        refusal: WireError | None = None
        if authorize is not None:
            refusal = authorize(request.method, url, record.headers, raw)
        if refusal is not None:
            return self._error_response(record, refusal)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._error_response(record, wire.bad_request("the request body must be a JSON object"))
        record.body = body

        scenario = self._scenarios.get(name)
        if scenario is None:
            known = ", ".join(self.scenario_names) or "(none)"
            error = wire.bad_request(f"unknown scenario {name!r}; known scenarios: {known}", status=404)
            error.body["error"]["known_scenarios"] = self.scenario_names
            return self._error_response(record, error)
        conversation = body.get("messages") or body.get("input") or body.get("contents") or []
        route = scenario.route_for(json.dumps(conversation))
        if route is not None:
            record.route = route
            scenario = scenario.routes[route]
        if SUMMARY_MARKER in wire.final_user_text(body):
            record.kind = "summary"
            return await self._answer(request, wire, record, ScriptedTurn(text=scenario.summary), None)
        return await self._answer_turn(request, wire, record, scenario, len(raw))

    async def _answer_turn(
        self, request: web.Request, wire: WireApi, record: RecordedRequest, scenario: Scenario, size: int
    ) -> web.StreamResponse:
        """Pick the turn, inject its scripted faults, then answer with it."""
        name, body = record.scenario, record.body
        if record.route is not None:
            name = f"{name}#{record.route}"  # each route keeps its own counters
        index = self._served[name] if scenario.select == "sequential" else wire.assistant_turns(body)
        record.turn_index = index
        turn = self._turn_at(scenario, name, index)
        key = (name, index)
        if self._failed[key] < turn.fail_times:
            self._failed[key] += 1
            headers = {}
            if turn.retry_after is not None:
                headers["retry-after"] = _retry_after_header(turn.retry_after)
            return self._error_response(record, wire.failure(turn.fail_status), headers)
        if turn.overflow:
            # An overflow is the whole scripted turn, so it counts as served.
            self._served[name] += 1
            return self._error_response(record, wire.overflow(size // 4))

        drop_after = turn.drop_after_chunks if self._dropped[key] < turn.drop_times else None
        # A stream no longer than the drop point is served whole, so it is no drop.
        if (
            drop_after is not None
            and streams(request, wire, body)
            and drop_after >= sum(1 for _ in wire.stream(turn, body))
        ):
            drop_after = None
        if drop_after is None:
            self._served[name] += 1
        else:
            self._dropped[key] += 1
        return await self._answer(request, wire, record, turn, drop_after)

    async def _answer(
        self,
        request: web.Request,
        wire: WireApi,
        record: RecordedRequest,
        turn: ScriptedTurn,
        drop_after: int | None,
    ) -> web.StreamResponse:
        record.status = 200
        self._log.add(record)
        if streams(request, wire, record.body):
            content_type = getattr(wire, "content_type", SSE_CONTENT_TYPE)
            return await stream_turn(request, turn, wire.stream(turn, record.body), drop_after, content_type)
        if drop_after is not None:
            return drop_connection(request)
        return web.json_response(wire.complete(turn, record.body))

    @staticmethod
    def _turn_at(scenario: Scenario, name: str, index: int) -> ScriptedTurn:
        if index < len(scenario.turns):
            return scenario.turns[index]
        return ScriptedTurn(text=f"(scripted server: no turn {index} in scenario {name})")

    def _error_response(
        self, record: RecordedRequest, error: WireError, headers: dict[str, str] | None = None
    ) -> web.Response:
        record.status = error.status
        self._log.add(record)
        return web.json_response(
            error.body, status=error.status, headers={**error.headers, **(headers or {})}
        )
