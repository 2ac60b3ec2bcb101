"""`/login` for pi's three OAuth providers: each flow as pi 0.73.1 runs it, and the login
written to auth.json as pi writes it (`{"type": "oauth", ...credentials}`, under pi's lock, in
a file of mode 0600), so pi and tempi share it.

Runs in the CLI process, which also resolves keys for the worker it runs; tokens go to
auth.json only, never to a log, the session or workflow history.
"""

from __future__ import annotations

from pathlib import Path

from tempi.config.auth_json import Entries, auth_json_path, update_auth
from tempi.config.oauth_login.anthropic import login_anthropic
from tempi.config.oauth_login.codex import login_openai_codex
from tempi.config.oauth_login.common import Flow, LoginCallbacks, LoginFailed, Prompt
from tempi.config.oauth_login.copilot import login_github_copilot
from tempi.config.oauth_refresh import OAUTH_PROVIDER_NAMES

__all__ = ["FLOWS", "LoginCallbacks", "LoginFailed", "Prompt", "login", "save_login"]

FLOWS: dict[str, Flow] = {
    "anthropic": login_anthropic,
    "github-copilot": login_github_copilot,
    "openai-codex": login_openai_codex,
}
assert set(FLOWS) == set(OAUTH_PROVIDER_NAMES)


def save_login(provider: str, credentials: Entries, path: Path | None = None) -> Path:
    """Store a login as pi's AuthStorage.set does: this provider's entry replaced, the rest kept."""
    path = path or auth_json_path()
    update_auth(lambda entries: {**entries, provider: {"type": "oauth", **credentials}}, path)
    return path


async def login(provider: str, callbacks: LoginCallbacks, path: Path | None = None) -> Path:
    """Run `provider`'s login and store it; where it was stored."""
    credentials = await FLOWS[provider](callbacks)
    return save_login(provider, credentials, path)
