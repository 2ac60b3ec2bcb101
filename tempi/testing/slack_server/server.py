"""The scripted Slack server: Web API, Socket Mode, file and control routes on one aiohttp app."""

from __future__ import annotations

from types import TracebackType

from aiohttp import web

from tempi.testing.slack_server.control import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, SlackControl
from tempi.testing.slack_server.control_http import ControlRoutes


class ScriptedSlackServer(SlackControl):
    """A local Slack for one bot: `async with ScriptedSlackServer() as slack:` then point
    slack_sdk at `slack.api_url` with `slack.bot_token` / `slack.app_token`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        bot_token: str = DEFAULT_BOT_TOKEN,
        app_token: str = DEFAULT_APP_TOKEN,
        bot_name: str = "mom",
        ack_timeout: float = 3.0,
        echo_bot_events: bool = True,
    ) -> None:
        super().__init__(bot_token, app_token, bot_name, ack_timeout, echo_bot_events)
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None

    # -- addresses ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._bound_port is None:
            raise RuntimeError("the scripted Slack server is not running; call start() first")
        return f"http://{self._host}:{self._bound_port}"

    def _socket_url(self, ticket: str) -> str:
        return f"ws://{self._host}:{self._bound_port}/link/?ticket={ticket}&app_id={self.workspace.app_id}"

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._web.handle)
        app.router.add_get("/link/", self.hub.handle_websocket)
        app.router.add_post("/upload/v1/{file_id}", self._files.upload)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._files.download)
        app.router.add_get("/files-pri/{team_file}/{name}", self._files.download)
        app.router.add_get("/signin", self._files.signin)
        ControlRoutes(self).install(app)
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
        self.holds.release_all()
        await self.hub.close()
        if runner is not None:
            await runner.cleanup()
        self._bound_port = None

    async def __aenter__(self) -> ScriptedSlackServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
