"""Where a Bedrock call goes and how it is authorised, read from the worker's environment
at call time, by pi's rules (amazon-bedrock.js):

- auth: `AWS_BEDROCK_SKIP_AUTH=1` signs with dummy keys (for proxies that need none);
  else `AWS_BEARER_TOKEN_BEDROCK` is sent as a bearer token; else SigV4 (service `bedrock`)
  with credentials from the AWS default chain (botocore's: environment keys unless
  `AWS_PROFILE` is set, the profile's ~/.aws files with SSO, process and assumed roles, web
  identity, container credentials, instance metadata);
- region: `AWS_REGION` > `AWS_DEFAULT_REGION` > the region of a standard
  `bedrock-runtime.<region>.amazonaws.com` base URL used as endpoint > the profile's region
  when `AWS_PROFILE` is set > `us-east-1`;
- endpoint: the model's base URL, unless it is a standard AWS one and a region or profile is
  configured (so the catalog's us-east-1 URLs yield to `AWS_REGION`); then the region's.

The API key tempi resolved for the provider (None, or the marker "<authenticated>") plays no
part: pi ignores it for Bedrock too.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError

from tempi.activities.llm.bedrock_request import configured_region
from tempi.activities.llm.errors import ProviderError
from tempi.agent.model_spec import ModelSpec

SERVICE = "bedrock"
DEFAULT_REGION = "us-east-1"
SETUP_HINT = (
    "set AWS_PROFILE (with its ~/.aws files), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
    "or AWS_BEARER_TOKEN_BEDROCK, and AWS_REGION"
)
_STANDARD_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_DUMMY_KEYS = ("dummy-access-key", "dummy-secret-key")


@dataclass(frozen=True)
class BedrockTarget:
    url: str  # of the model's converse-stream operation
    region: str
    # A bearer token, or the credentials to sign with (which may refresh themselves).
    auth: str | Credentials


def standard_endpoint_region(base_url: str) -> str | None:
    try:
        host = (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        return None
    match = _STANDARD_HOST.match(host)
    return match.group(1) if match else None


def resolve_target(model: ModelSpec) -> BedrockTarget:
    """Blocking (a profile's files, container or web-identity credentials): call it off
    the event loop."""
    environment = os.environ
    region = configured_region(environment)
    has_profile = bool(environment.get("AWS_PROFILE"))
    endpoint_region = standard_endpoint_region(model.base_url)
    explicit = bool(model.base_url) and (endpoint_region is None or (region is None and not has_profile))
    if region is None and explicit and endpoint_region is not None:
        region = endpoint_region
    session = None
    if region is None and has_profile:
        session = _session_for(environment)
        try:
            region = session.get_config_variable("region")
        except BotoCoreError as exc:
            raise ProviderError(f"Amazon Bedrock: {exc}. To fix, {SETUP_HINT}") from None
        if not region:
            raise ProviderError(
                f"Amazon Bedrock: no region for profile '{environment['AWS_PROFILE']}'. "
                "Set AWS_REGION or the profile's region in ~/.aws/config"
            )
    region = region or DEFAULT_REGION
    endpoint = model.base_url.rstrip("/") if explicit else _regional_endpoint(region)
    url = f"{endpoint}/model/{quote(model.id, safe='')}/converse-stream"

    bearer = environment.get("AWS_BEARER_TOKEN_BEDROCK") or None
    if environment.get("AWS_BEDROCK_SKIP_AUTH") == "1":
        return BedrockTarget(url, region, Credentials(*_DUMMY_KEYS))
    if bearer is not None:
        return BedrockTarget(url, region, bearer)
    return BedrockTarget(url, region, _credentials(session or _session_for(environment), model))


def _regional_endpoint(region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://bedrock-runtime.{region}.{suffix}"


def _credentials(session: botocore.session.Session, model: ModelSpec) -> Credentials:
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise ProviderError(
            f"Amazon Bedrock: could not load AWS credentials: {exc}. To fix, {SETUP_HINT}"
        ) from None
    if credentials is None:
        raise ProviderError(
            f"No AWS credentials for Amazon Bedrock (model '{model.id}'): {SETUP_HINT} (see `aws configure`)"
        )
    return credentials


# botocore sessions by what they read (the AWS_* variables and the ~/.aws files' change
# times): refreshing credentials (container, web identity, SSO, assumed roles) are fetched
# once and renewed as they near expiry, instead of on every model call, while a changed
# variable or file takes effect on the next call.
_sessions: dict[tuple[object, ...], botocore.session.Session] = {}
_sessions_lock = threading.Lock()
_MAX_SESSIONS = 8


def _session_for(env: Mapping[str, str]) -> botocore.session.Session:
    files = (
        env.get("AWS_CONFIG_FILE") or "~/.aws/config",
        env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
    )
    key = (
        tuple(sorted((name, value) for name, value in env.items() if name.startswith("AWS_"))),
        tuple(_changed_at(path) for path in files),
        os.environ.get("HOME"),
    )
    with _sessions_lock:
        session = _sessions.get(key)
        if session is None:
            if len(_sessions) >= _MAX_SESSIONS:
                _sessions.clear()
            # A named profile, as in the AWS JS SDK pi uses, also means the AWS_ACCESS_KEY_ID
            # pair is not used.
            session = _sessions[key] = botocore.session.Session(profile=env.get("AWS_PROFILE") or None)
    return session


def _changed_at(path: str) -> float | None:
    try:
        return Path(path).expanduser().stat().st_mtime
    except OSError:
        return None


def sign_headers(target: BedrockTarget, body: bytes) -> dict[str, str]:
    """The headers of one attempt (each attempt is signed anew, with its own date).
    Blocking when credentials need refreshing: call it off the event loop."""
    headers = {"Content-Type": "application/json"}
    if isinstance(target.auth, str):
        return {**headers, "Authorization": f"Bearer {target.auth}"}
    try:
        frozen = target.auth.get_frozen_credentials()
    except BotoCoreError as exc:
        raise ProviderError(
            f"Amazon Bedrock: could not refresh AWS credentials: {exc}. To fix, {SETUP_HINT}"
        ) from None
    request = AWSRequest(method="POST", url=target.url, data=body, headers=headers)
    SigV4Auth(frozen, SERVICE, target.region).add_auth(request)
    return dict(request.headers.items())
