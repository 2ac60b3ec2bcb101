"""Vertex AI's Application Default Credentials: a credentials file and the access token it
yields, through google-auth (pi uses google-auth-library).

The file is GOOGLE_APPLICATION_CREDENTIALS (which must exist) or gcloud's
~/.config/gcloud/application_default_credentials.json, as pi looks for it. Any type
google-auth reads works: authorized_user (`gcloud auth application-default login`),
service_account, external_account (workload identity federation), impersonated. The
credentials and their token are kept in this worker's memory until the token expires or
the file changes; they never leave the worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tempi.activities.llm.errors import ProviderError

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
ADC_SETUP = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a credentials file or run "
    "`gcloud auth application-default login`, with GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION"
)

_AWS_SUBJECT_TOKEN_TYPE = "urn:ietf:params:aws:token-type:aws4_request"

_lock = threading.Lock()
# (file, its modification time) -> google-auth credentials; one file is used at a time.
_credentials: dict[tuple[str, int], Any] = {}


def adc_file(env: Mapping[str, str] | None = None) -> Path | None:
    environment = os.environ if env is None else env
    explicit = environment.get("GOOGLE_APPLICATION_CREDENTIALS")
    path = (
        Path(explicit)
        if explicit
        else Path.home() / ".config" / "gcloud" / "application_default_credentials.json"
    )
    return path if path.is_file() else None


async def adc_access_token(path: Path) -> str:
    """A valid access token from the credentials in `path`, refreshed when needed. The
    refresh is blocking HTTP (google-auth's requests transport), so it runs in a thread."""
    return await asyncio.to_thread(_access_token, path)


def _access_token(path: Path) -> str:
    # Imported here: only ADC users pay for google-auth.
    import google.auth.exceptions
    from google.auth.transport.requests import Request

    with _lock:
        try:
            key = (str(path), path.stat().st_mtime_ns)
            credentials = _credentials.get(key)
            if credentials is None:
                credentials = _load(json.loads(path.read_text(encoding="utf-8")))
                _credentials.clear()
                _credentials[key] = credentials
            if not credentials.valid:
                credentials.refresh(Request())
        except (OSError, ValueError) as err:
            raise ProviderError(
                f"Vertex AI: cannot read the ADC credentials file {path}: {err} ({ADC_SETUP})"
            ) from err
        except google.auth.exceptions.DefaultCredentialsError as err:
            raise ProviderError(
                f"Vertex AI: cannot use the ADC credentials in {path}: {err} ({ADC_SETUP})"
            ) from err
        except google.auth.exceptions.TransportError as err:
            raise ProviderError(f"Connection error: Vertex AI token endpoint: {err}") from err
        except google.auth.exceptions.RefreshError as err:
            if getattr(err, "retryable", False):
                raise ProviderError(f"Vertex AI token endpoint temporarily unavailable: {err}") from err
            raise ProviderError(
                f"Vertex AI: the ADC credentials in {path} gave no access token: {err}"
            ) from err
        token: str = credentials.token
        return token


def _load(info: dict[str, Any]) -> Any:
    """Credentials of the file's type, built by that type's own loader: google-auth's generic
    `load_credentials_from_file` would also look up the project of a workload identity
    pool over the network, which Vertex does not need (the project is
    GOOGLE_CLOUD_PROJECT)."""
    kind = info.get("type")
    scopes = [SCOPE]
    if kind == "authorized_user":
        from google.oauth2 import credentials as user

        return user.Credentials.from_authorized_user_info(info, scopes=scopes)
    if kind == "service_account":
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_info(info, scopes=scopes)
    if kind == "impersonated_service_account":
        from google.auth import impersonated_credentials

        return impersonated_credentials.Credentials.from_impersonated_service_account_info(
            info, scopes=scopes
        )
    if kind == "external_account_authorized_user":
        from google.auth import external_account_authorized_user

        return external_account_authorized_user.Credentials.from_info(info, scopes=scopes)
    if kind == "external_account":
        source = info.get("credential_source") or {}
        if info.get("subject_token_type") == _AWS_SUBJECT_TOKEN_TYPE:
            from google.auth import aws

            return aws.Credentials.from_info(info, scopes=scopes)
        if isinstance(source, dict) and source.get("executable") is not None:
            from google.auth import pluggable

            return pluggable.Credentials.from_info(info, scopes=scopes)
        from google.auth import identity_pool

        return identity_pool.Credentials.from_info(info, scopes=scopes)
    raise ValueError(f"credentials of type {kind!r} are not supported")
