"""/login and /logout: logins live in auth.json, shared with pi.

/login runs pi's login of a subscription provider (Claude Pro/Max, GitHub Copilot, ChatGPT
Codex; a picker, or `/login PROVIDER`) and writes it to the auth.json tempi reads (pi's, when
tempi has none of its own), as pi writes it. /logout removes a provider's entry, for pi too. Neither ever
shows a key or token; what the user pastes answers the login, never the editor's history.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tempi.cli.interactive.extras_host import ExtrasHost
from tempi.cli.interactive.picker import Picker, PickerItem
from tempi.cli.interactive.render import notice
from tempi.config.auth_json import auth_json_path, read_auth, remove_entry
from tempi.config.errors import ConfigError
from tempi.config.oauth_login import LoginCallbacks, LoginFailed, Prompt, login
from tempi.config.oauth_refresh import OAUTH_PROVIDER_NAMES

# Providers whose login also listens for the browser's redirect; the user may paste it instead.
_CALLBACK_SERVER = {"anthropic", "openai-codex"}


def _stored() -> str:
    entries = read_auth()
    if not entries:
        return "none yet"
    return ", ".join(
        f"{provider} ({'login' if isinstance(e, dict) and e.get('type') == 'oauth' else 'API key'})"
        for provider, e in sorted(entries.items())
    )


def _logged_in(provider: str) -> bool:
    try:
        entry = read_auth().get(provider)
    except ConfigError:
        return False
    return isinstance(entry, dict) and entry.get("type") == "oauth"


def provider_for(word: str) -> str | None:
    """The OAuth provider `/login word` names: its id or the start of its name."""
    word = word.lower()
    if word in OAUTH_PROVIDER_NAMES:
        return word
    matches = [pid for pid, name in OAUTH_PROVIDER_NAMES.items() if name.lower().startswith(word)]
    return matches[0] if len(matches) == 1 else None


def logout_text(provider: str) -> tuple[str, str]:
    """The answer to `/logout provider`, and its colour; removes the entry."""
    path = auth_json_path()
    if not provider:
        return f"Usage: /logout <provider>. Stored in {path}: {_stored()}.", "yellow"
    if not remove_entry(provider, path):
        return f"No login or key for {provider} in {path}. Stored: {_stored()}.", "yellow"
    return f"Logged out of {provider}: removed from {path} (for pi too).", "green"


def _open_browser(url: str) -> None:
    """As pi, open the URL; but only where there is a desktop to open it on (a text browser
    started in this terminal would fight the editor for it)."""
    if sys.platform == "darwin":
        opener = "open"
    elif os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        opener = "xdg-open"
    else:
        return
    if shutil.which(opener):
        subprocess.Popen(
            [opener, url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def _callbacks(app: ExtrasHost, provider: str) -> LoginCallbacks:
    def say(text: str, colour: str = "dim") -> None:
        app.spawn(app.show(notice(text, colour)))

    def on_auth(url: str, instructions: str | None) -> None:
        say(url, "cyan")
        if instructions:
            say(instructions, "yellow")
        if provider == "github-copilot":
            say("Waiting for browser authentication... (esc to cancel)")
        _open_browser(url)

    async def on_prompt(prompt: Prompt) -> str:
        return await app.ask(prompt.message, prompt.placeholder)

    async def pasted() -> str:
        return await app.ask("Paste redirect URL below, or complete login in browser:")

    return LoginCallbacks(
        on_auth=on_auth,
        on_prompt=on_prompt,
        on_progress=say,
        on_manual_code_input=pasted if provider in _CALLBACK_SERVER else None,
    )


async def run_login(app: ExtrasHost, provider: str) -> None:
    name = OAUTH_PROVIDER_NAMES[provider]
    await app.show(notice(f"Login to {name}", "bold"))
    try:
        done = await app.run_dialog(login(provider, _callbacks(app, provider)))
    except (LoginFailed, ConfigError) as err:
        await app.show(notice(f"Failed to login to {name}: {err}", "red"))
        return
    if not done:
        await app.show(notice("Login cancelled.", "yellow"))
        return
    await app.show(
        notice(
            f"Logged in to {name}. Credentials saved to {auth_json_path()} (pi uses them too). "
            f"/model chooses one of its models.",
            "green",
        )
    )


async def cmd_login(app: ExtrasHost, arg: str) -> None:
    if arg:
        provider = provider_for(arg)
        if provider is None:
            known = ", ".join(f"{pid} ({name})" for pid, name in OAUTH_PROVIDER_NAMES.items())
            await app.show(notice(f"No login for {arg!r}. /login logs in to: {known}.", "red"))
            return
        await run_login(app, provider)
        return

    async def chosen(provider: str) -> None:
        await run_login(app, provider)

    items = [
        PickerItem(name, pid, "✓ logged in" if _logged_in(pid) else "")
        for pid, name in sorted(OAUTH_PROVIDER_NAMES.items(), key=lambda item: item[1])
    ]
    app.open_picker(Picker("Select provider to login:", items, chosen))


async def cmd_logout(app: ExtrasHost, arg: str) -> None:
    try:
        text, colour = logout_text(arg.strip())
    except ConfigError as err:
        text, colour = str(err), "red"
    await app.show(notice(text, colour))
