"""OpenAI Codex's (ChatGPT Plus/Pro) login, as pi 0.73.1 (utils/oauth/openai-codex.js): an
authorization code with PKCE and a random state, sent back to a local server on port 1455 or,
when that port is taken or the browser is elsewhere, pasted by the user; exchanged at the token
endpoint (moved for tests by TEMPI_TEST_OAUTH_TOKEN_URL_OPENAI_CODEX). The access token names
the ChatGPT account, kept beside it as `accountId`."""

from __future__ import annotations

import secrets
import time
from urllib.parse import urlencode

from tempi.config.auth_json import Entries
from tempi.config.oauth_login.callback_server import (
    CallbackServer,
    Judge,
    callback_port,
    start_callback_server,
)
from tempi.config.oauth_login.common import (
    LoginCallbacks,
    LoginFailed,
    Prompt,
    browser_or_paste,
    fetch_json,
    issued_tokens,
    parse_authorization_input,
    pkce,
)
from tempi.config.oauth_refresh import CODEX_CLIENT_ID, CODEX_TOKEN_URL, codex_account_id, test_token_url

PROVIDER = "openai-codex"
AUTHORIZE_URL = "https://auth.openai.com/oauth/authorize"
CALLBACK_PORT = 1455
CALLBACK_PATH = "/auth/callback"
SCOPE = "openid profile email offline_access"


def _judge(state: str) -> Judge:
    def judge(query: dict[str, str]) -> tuple[str, str | None] | None:
        if query.get("state") != state:
            return "State mismatch.", None
        if not query.get("code"):
            return "Missing authorization code.", None
        return None

    return judge


async def login_openai_codex(callbacks: LoginCallbacks, *, originator: str = "pi") -> Entries:
    verifier, challenge = pkce()
    state = secrets.token_hex(16)
    port = callback_port(PROVIDER, CALLBACK_PORT)
    server: CallbackServer | None
    try:
        server = await start_callback_server(
            port,
            CALLBACK_PATH,
            _judge(state),
            "OpenAI authentication completed. You can close this window.",
        )
    except OSError:
        server = None  # as pi: the user pastes the redirect URL instead
    redirect_uri = server.redirect_uri if server else f"http://localhost:{port}{CALLBACK_PATH}"
    query = urlencode(
        {
            "response_type": "code",
            "client_id": CODEX_CLIENT_ID,
            "redirect_uri": redirect_uri,
            "scope": SCOPE,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "id_token_add_organizations": "true",
            "codex_cli_simplified_flow": "true",
            "originator": originator,
        }
    )
    callbacks.on_auth(f"{AUTHORIZE_URL}?{query}", "A browser window should open. Complete login to finish.")
    try:
        redirected, pasted = await browser_or_paste(
            server.wait() if server else None, callbacks.on_manual_code_input
        )
        code = redirected.get("code") if redirected else None
        if code is None:
            if pasted is None:
                pasted = await callbacks.on_prompt(
                    Prompt("Paste the authorization code (or full redirect URL):")
                )
            code, pasted_state = parse_authorization_input(pasted)
            if pasted_state and pasted_state != state:
                raise LoginFailed("State mismatch")
        if not code:
            raise LoginFailed("Missing authorization code")
        return await exchange_code(code, verifier, redirect_uri)
    finally:
        if server is not None:
            await server.close()


async def exchange_code(code: str, verifier: str, redirect_uri: str) -> Entries:
    url = test_token_url(PROVIDER) or CODEX_TOKEN_URL
    data = await fetch_json(
        "POST",
        url,
        "OpenAI Codex token exchange failed",
        data={
            "grant_type": "authorization_code",
            "client_id": CODEX_CLIENT_ID,
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": redirect_uri,
        },
    )
    access, refresh, expires_in = issued_tokens(data, url)
    account = codex_account_id(access)
    if account is None:
        raise LoginFailed("Failed to extract accountId from token")
    return {
        "access": access,
        "refresh": refresh,
        "expires": int(time.time() * 1000) + int(expires_in * 1000),
        "accountId": account,
    }
