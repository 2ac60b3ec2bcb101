"""Secrets from files: every secret tempi reads from the environment may instead come from a
file, so that the environment, everywhere in a container, holds only a path:

- `NAME_FILE` names the file of NAME (ANTHROPIC_API_KEY_FILE=/run/secrets/anthropic);
- `TEMPI_SECRETS_DIR` names a directory whose file NAME holds NAME (a Kubernetes Secret
  mounted as a volume, Docker's /run/secrets); a missing or empty file there means unset.

A file is read when the secret is needed: a mounted secret the orchestrator updates is picked
up without a restart.

`tempi worker` also takes the secrets it was given as plain variables out of its environment
(workers/secret_guard.py); they are then read from here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tempi.config.errors import ConfigError

FILE_SUFFIX = "_FILE"
SECRETS_DIR_VARIABLE = "TEMPI_SECRETS_DIR"

_held: dict[str, str] = {}


def hold(name: str, value: str) -> None:
    """Keep a secret taken out of the environment in this process's memory only."""
    _held[name] = value


def held_secret(name: str) -> str | None:
    return _held.get(name)


def read_secret_file(name: str, path: str) -> str:
    """The secret in the file `NAME_FILE` names, without its trailing newline."""
    variable = name + FILE_SUFFIX
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ConfigError(
            f"{variable} names {path}, which cannot be read ({err.strerror or err}). "
            f"Mount the secret there, or unset {variable}."
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{variable} names {path}, which is not UTF-8 text.") from None
    if not value:
        raise ConfigError(
            f"{variable} names {path}, which is empty. Put the secret in it, or unset {variable}."
        )
    return value


def secret_value(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The secret `name`: the variable, what this worker took out of its environment, or the
    content of the file `NAME_FILE` names; None when none is set. `env` replaces the
    process's environment (and what it held)."""
    environment = os.environ if env is None else env
    value = environment.get(name) or (_held.get(name) if env is None else None)
    if value:
        return value
    path = environment.get(name + FILE_SUFFIX)
    if path:
        return read_secret_file(name, path)
    return secret_in_dir(name, env)


def secret_in_dir(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The secret `name` in TEMPI_SECRETS_DIR, if that holds a non-empty file of that name."""
    directory = (os.environ if env is None else env).get(SECRETS_DIR_VARIABLE)
    if not directory or not name.isidentifier():
        return None
    try:
        return (Path(directory) / name).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None
