"""Anthropic's (Claude Pro/Max) login, as pi 0.73.1 (utils/oauth/anthropic.js): an
authorization code with PKCE (the verifier doubles as the state), sent back to a local server
on port 53692 or pasted by the user (the redirect URL, or the `code#state` Claude's page
shows), then exchanged at the token endpoint (moved for tests by
TEMPI_TEST_OAUTH_TOKEN_URL_ANTHROPIC)."""

from __future__ import annotations

import time
from urllib.parse import urlencode

from tempi.config.auth_json import Entries
from tempi.config.oauth_login.callback_server import Judge, callback_port, start_callback_server
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
from tempi.config.oauth_refresh import (
    ANTHROPIC_CLIENT_ID,
    ANTHROPIC_TOKEN_URL,
    FIVE_MINUTES_MS,
    test_token_url,
)

PROVIDER = "anthropic"
AUTHORIZE_URL = "https://claude.ai/oauth/authorize"
CALLBACK_PORT = 53692
CALLBACK_PATH = "/callback"
SCOPES = (
    "org:create_api_key user:profile user:inference user:sessions:claude_code "
    "user:mcp_servers user:file_upload"
)


def _judge(verifier: str) -> Judge:
    def judge(query: dict[str, str]) -> tuple[str, str | None] | None:
        if query.get("error"):
            return "Anthropic authentication did not complete.", f"Error: {query['error']}"
        if not query.get("code") or not query.get("state"):
            return "Missing code or state parameter.", None
        if query["state"] != verifier:
            return "State mismatch.", None
        return None

    return judge


async def login_anthropic(callbacks: LoginCallbacks) -> Entries:
    verifier, challenge = pkce()
    port = callback_port(PROVIDER, CALLBACK_PORT)
    try:
        server = await start_callback_server(
            port,
            CALLBACK_PATH,
            _judge(verifier),
            "Anthropic authentication completed. You can close this window.",
        )
    except OSError as exc:
        raise LoginFailed(
            f"Cannot listen on port {port} for the browser's redirect ({exc.strerror}). Is another "
            "login (pi's or tempi's) waiting there? Finish or cancel it, then run /login again."
        ) from None
    try:
        query = urlencode(
            {
                "code": "true",
                "client_id": ANTHROPIC_CLIENT_ID,
                "response_type": "code",
                "redirect_uri": server.redirect_uri,
                "scope": SCOPES,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": verifier,
            }
        )
        callbacks.on_auth(
            f"{AUTHORIZE_URL}?{query}",
            "Complete login in your browser. If the browser is on another machine, "
            "paste the final redirect URL here.",
        )
        redirected, pasted = await browser_or_paste(server.wait(), callbacks.on_manual_code_input)
        if redirected is not None:
            code, state = redirected.get("code"), redirected.get("state")
        else:
            if pasted is None:
                pasted = await callbacks.on_prompt(
                    Prompt("Paste the authorization code or full redirect URL:", server.redirect_uri)
                )
            code, state = parse_authorization_input(pasted)
            if state and state != verifier:
                raise LoginFailed("OAuth state mismatch")
            state = state or verifier
        if not code:
            raise LoginFailed("Missing authorization code")
        callbacks.on_progress("Exchanging authorization code for tokens...")
        return await exchange_code(code, state or verifier, verifier, server.redirect_uri)
    finally:
        await server.close()


async def exchange_code(code: str, state: str, verifier: str, redirect_uri: str) -> Entries:
    url = test_token_url(PROVIDER) or ANTHROPIC_TOKEN_URL
    data = await fetch_json(
        "POST",
        url,
        "Token exchange failed",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        json={
            "grant_type": "authorization_code",
            "client_id": ANTHROPIC_CLIENT_ID,
            "code": code,
            "state": state,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        },
    )
    access, refresh, expires_in = issued_tokens(data, url)
    return {
        "refresh": refresh,
        "access": access,
        "expires": int(time.time() * 1000) + int(expires_in * 1000) - FIVE_MINUTES_MS,
    }
