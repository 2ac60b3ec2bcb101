"""What an OAuth token endpoint answered, read the same way for a login and a refresh."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

TIMEOUT_S = 30.0


class TokenEndpointError(Exception):
    """The endpoint's answer cannot be used; the message holds no token."""


def json_object(response: httpx.Response, url: str) -> dict[str, Any]:
    if response.status_code >= 400:
        # Never the body: an error answer may echo a refresh token or an authorization code.
        raise TokenEndpointError(f"{url} answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise TokenEndpointError(f"{url} answered with something other than JSON") from None
    if not isinstance(data, dict):
        raise TokenEndpointError(f"{url} answered with something other than a JSON object")
    return data


def unreachable(url: str, exc: Exception) -> TokenEndpointError:
    return TokenEndpointError(f"{url} could not be reached ({type(exc).__name__})")
