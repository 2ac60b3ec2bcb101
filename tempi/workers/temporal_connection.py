"""Where tempi's Temporal clients connect, read as every Temporal tool reads it
(`temporalio.envconfig`): TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
TEMPORAL_TLS*, TEMPORAL_GRPC_META_*, and the profiles of temporal.toml chosen with
TEMPORAL_PROFILE and TEMPORAL_CONFIG_FILE. Unlike the Temporal CLI, tempi does not follow
temporal.toml's default profile unless one of those two variables chooses the file.
tempi's older TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY still work, as aliases of the *_PATH
variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.envconfig import ClientConfigProfile
from temporalio.service import TLSConfig

from tempi.config.errors import ConfigError
from tempi.config.secret_files import secret_value

# tempi's names before envconfig, kept so existing deployments go on working.
ALIASES = {
    "TEMPORAL_TLS_CERT": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_KEY": "TEMPORAL_TLS_CLIENT_KEY_PATH",
}
DEFAULT_NAMESPACE = "default"
API_KEY_VARIABLE = "TEMPORAL_API_KEY"


class TemporalSettingsError(ValueError):
    """A Temporal connection setting that cannot be used; the message says which and what to do."""


@dataclass(frozen=True)
class TemporalSettings:
    address: str | None  # None: no server configured, so tempi runs its embedded one
    namespace: str = DEFAULT_NAMESPACE
    api_key: str | None = field(default=None, repr=False)
    tls: bool | TLSConfig = field(default=False, repr=False)
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)
    origin: str = "the environment"
    # The address of temporal.toml's default profile, which tempi does not follow unless
    # TEMPORAL_PROFILE or TEMPORAL_CONFIG_FILE chooses the file (None: there is none).
    unchosen_profile_address: str | None = None


def load_settings(environ: Mapping[str, str] | None = None) -> TemporalSettings:
    env = dict(os.environ if environ is None else environ)
    if not env.get(API_KEY_VARIABLE):
        # What `tempi worker` took out of its environment, or TEMPORAL_API_KEY_FILE's file.
        try:
            key = secret_value(API_KEY_VARIABLE, environ)
        except ConfigError as err:
            raise TemporalSettingsError(str(err)) from None
        if key:
            env[API_KEY_VARIABLE] = key
    for old, new in ALIASES.items():
        if env.get(old) and not env.get(new):
            env[new] = env[old]
    origin = _origin(env)
    config_file = env.get("TEMPORAL_CONFIG_FILE")
    if config_file and not Path(config_file).is_file():
        raise TemporalSettingsError(
            f"TEMPORAL_CONFIG_FILE names {config_file}, which is not a file. Point it at your "
            "temporal.toml, or unset it."
        )
    # A profile another Temporal tool uses by default must not send a coding session, its
    # files and its keys' use to a shared cluster: the file counts only when chosen.
    chosen = bool(env.get("TEMPORAL_PROFILE") or config_file)
    try:
        profile = ClientConfigProfile.load(override_env_vars=env, disable_file=not chosen)
        unchosen = None if chosen or env.get("TEMPORAL_ADDRESS") else _default_profile_address(env)
    except Exception as err:  # the SDK's core raises its own ConfigError, not exported
        raise TemporalSettingsError(
            f"cannot read the Temporal connection settings ({origin}): {_without_excerpt(str(err))}. "
            "Fix the file or TEMPORAL_PROFILE (`temporal config list` shows the profiles)."
        ) from None
    tls: bool | TLSConfig = False
    if profile.tls is not None:
        _check_client_pair(profile, origin)
        try:
            tls = profile.tls.to_connect_tls_config()
        except OSError as err:
            raise TemporalSettingsError(
                f"cannot read a TLS file the Temporal connection settings ({origin}) name: "
                f"{err.strerror} ({err.filename}). "
                "Fix the path (TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH, "
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH or the profile's [tls] table)."
            ) from None
    elif profile.api_key:
        tls = True  # an API key is only ever sent over TLS
    return TemporalSettings(
        address=profile.address or None,
        namespace=profile.namespace or DEFAULT_NAMESPACE,
        api_key=profile.api_key or None,
        tls=tls,
        rpc_metadata=dict(profile.grpc_meta),
        origin=origin,
        unchosen_profile_address=unchosen,
    )


def _default_profile_address(env: Mapping[str, str]) -> str | None:
    """The address temporal.toml's default profile names, for saying that it is not used."""
    try:
        without_temporal = {k: v for k, v in env.items() if not k.startswith("TEMPORAL_")}
        return ClientConfigProfile.load(override_env_vars=without_temporal).address or None
    except Exception:  # an unreadable file that nothing uses is not this command's problem
        return None


def _origin(env: Mapping[str, str]) -> str:
    """Where the settings came from, for error messages (never their values)."""
    name = env.get("TEMPORAL_PROFILE")
    file = env.get("TEMPORAL_CONFIG_FILE")
    if name or file:
        where = file or "the default temporal.toml"
        return f"profile '{name or 'default'}' of {where}, and TEMPORAL_* variables"
    return "TEMPORAL_* variables and the default temporal.toml"


def _check_client_pair(profile: ClientConfigProfile, origin: str) -> None:
    assert profile.tls is not None
    cert, key = profile.tls.client_cert, profile.tls.client_private_key
    if (cert is None) != (key is None):
        missing = "key" if key is None else "certificate"
        raise TemporalSettingsError(
            f"the Temporal connection settings ({origin}) give a TLS client "
            f"{'certificate' if key is None else 'key'} without its {missing}. "
            "Set both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or neither)."
        )


def _without_excerpt(message: str) -> str:
    """The parser's message without the quoted lines of the file, which may hold an API key."""
    lines = [line.strip() for line in message.splitlines() if line.strip() and "|" not in line]
    return "; ".join(lines) or "unreadable"
