"""GitHub Copilot's login, as pi 0.73.1 (utils/oauth/github-copilot.js): an optional GitHub
Enterprise domain, GitHub's device flow (the user enters a code at a URL while the flow polls
for the GitHub token, slowing down when asked), the Copilot token that GitHub token gets, and
the policy of every Copilot model enabled (some, such as Claude's, need it).

Tests move GitHub's endpoints with TEMPI_TEST_OAUTH_DEVICE_CODE_URL_GITHUB_COPILOT and
TEMPI_TEST_OAUTH_ACCESS_TOKEN_URL_GITHUB_COPILOT (Copilot's token endpoint and API as
oauth_refresh.py says).
"""

from __future__ import annotations

import asyncio
import base64
import math
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ValidationError

from tempi.config.auth_json import Entries
from tempi.config.oauth_login.common import LoginCallbacks, LoginFailed, Prompt, fetch_json
from tempi.config.oauth_refresh import (
    COPILOT_HEADERS,
    RefreshFailed,
    copilot_base_url,
    copilot_domain,
    refresh_github_copilot,
    test_url,
)

PROVIDER = "github-copilot"
CLIENT_ID = base64.b64decode("SXYxLmI1MDdhMDhjODdlY2ZlOTg=").decode()
_FORM_HEADERS = {
    "Accept": "application/json",
    "Content-Type": "application/x-www-form-urlencoded",
    "User-Agent": COPILOT_HEADERS["User-Agent"],
}
INITIAL_POLL_INTERVAL_MULTIPLIER = 1.2
SLOW_DOWN_POLL_INTERVAL_MULTIPLIER = 1.4
ENTERPRISE_PROMPT = Prompt(
    "GitHub Enterprise URL/domain (blank for github.com)", "company.ghe.com", allow_empty=True
)

Sleep = Callable[[float], Awaitable[None]]


class DeviceCode(BaseModel):
    device_code: str
    user_code: str
    verification_uri: str
    interval: float
    expires_in: float


def github_urls(domain: str) -> tuple[str, str]:
    """Where the device flow starts and where it polls, for github.com or an enterprise."""
    return (
        test_url("DEVICE_CODE_URL", PROVIDER) or f"https://{domain}/login/device/code",
        test_url("ACCESS_TOKEN_URL", PROVIDER) or f"https://{domain}/login/oauth/access_token",
    )


async def start_device_flow(domain: str) -> DeviceCode:
    url = github_urls(domain)[0]
    data = await fetch_json(
        "POST",
        url,
        "GitHub's device flow did not start",
        headers=_FORM_HEADERS,
        data={"client_id": CLIENT_ID, "scope": "read:user"},
    )
    try:
        return DeviceCode.model_validate(data, strict=False)
    except ValidationError:
        raise LoginFailed(f"{url} answered without the device code fields") from None


async def poll_for_github_token(domain: str, device: DeviceCode, sleep: Sleep = asyncio.sleep) -> str:
    """Poll until the user has entered the code (pi's pollForGitHubAccessToken: the interval
    GitHub gives, times 1.2, or times 1.4 and GitHub's new interval after a slow_down)."""
    url = github_urls(domain)[1]
    deadline = time.monotonic() + device.expires_in
    interval_ms = max(1000, math.floor(device.interval * 1000))
    multiplier = INITIAL_POLL_INTERVAL_MULTIPLIER
    slow_downs = 0
    while time.monotonic() < deadline:
        remaining_ms = (deadline - time.monotonic()) * 1000
        await sleep(min(math.ceil(interval_ms * multiplier), remaining_ms) / 1000)
        answer = await fetch_json(
            "POST",
            url,
            "GitHub's device flow failed",
            headers=_FORM_HEADERS,
            data={
                "client_id": CLIENT_ID,
                "device_code": device.device_code,
                "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            },
        )
        token, error = answer.get("access_token"), answer.get("error")
        if isinstance(token, str):
            return token
        if not isinstance(error, str):
            continue
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            slow_downs += 1
            given = answer.get("interval")
            interval_ms = (
                int(given * 1000)
                if isinstance(given, (int, float)) and given > 0
                else max(1000, interval_ms + 5000)
            )
            multiplier = SLOW_DOWN_POLL_INTERVAL_MULTIPLIER
            continue
        description = answer.get("error_description")
        raise LoginFailed(f"Device flow failed: {error}" + (f": {description}" if description else ""))
    if slow_downs:
        raise LoginFailed(
            "Device flow timed out after one or more slow_down responses. This is often caused by "
            "clock drift in WSL or VM environments. Please sync or restart the VM clock and try again."
        )
    raise LoginFailed("Device flow timed out")


async def enable_models(credential: Entries) -> dict[str, bool]:
    """Accept the policy of every built-in Copilot model (pi's enableAllGitHubCopilotModels);
    whether each was enabled. A refusal is no failure of the login."""
    import httpx

    from tempi.agent.model_registry import builtin_registry

    base_url = copilot_base_url(credential)
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {credential['access']}",
        **COPILOT_HEADERS,
        "openai-intent": "chat-policy",
        "x-interaction-type": "chat-policy",
    }
    ids = [m.id for m in builtin_registry().models_for(PROVIDER)]
    async with httpx.AsyncClient(timeout=30.0) as client:

        async def enable(model_id: str) -> bool:
            try:
                response = await client.post(
                    f"{base_url}/models/{model_id}/policy", headers=headers, json={"state": "enabled"}
                )
            except httpx.HTTPError:
                return False
            return response.is_success

        enabled = await asyncio.gather(*(enable(i) for i in ids))
    return dict(zip(ids, enabled, strict=True))


async def login_github_copilot(callbacks: LoginCallbacks, *, sleep: Sleep = asyncio.sleep) -> Entries:
    answer = await callbacks.on_prompt(ENTERPRISE_PROMPT)
    enterprise = copilot_domain(answer)
    if answer.strip() and enterprise is None:
        raise LoginFailed("Invalid GitHub Enterprise URL/domain")
    domain = enterprise or "github.com"
    device = await start_device_flow(domain)
    callbacks.on_auth(device.verification_uri, f"Enter code: {device.user_code}")
    github_token = await poll_for_github_token(domain, device, sleep)
    try:
        credential = await asyncio.to_thread(
            refresh_github_copilot, {"refresh": github_token, "enterpriseUrl": enterprise}
        )
    except RefreshFailed as exc:
        raise LoginFailed(f"No Copilot token for this GitHub account: {exc}") from None
    callbacks.on_progress("Enabling models...")
    await enable_models(credential)
    return credential
