"""settings.json: pi's keys and defaults, pi's and tempi's files merged key by key.

Four files are read, each overriding the ones before it (nested objects merge key by key,
so a file names only what it changes):

1. pi's global `$PI_CODING_AGENT_DIR/settings.json` (default `~/.pi/agent/settings.json`)
2. tempi's global `$TEMPI_HOME/settings.json` (default `~/.tempi/settings.json`)
3. pi's project `<cwd>/.pi/settings.json`
4. tempi's project `<cwd>/.tempi/settings.json`

so a tempi file adds to pi's setup instead of hiding it. A project file's keys that run
code or choose paths count only while the owner trusts the project (project_trust.py).
Keys tempi does not use are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from tempi.agent.base import PiModel
from tempi.agent.model_spec import ThinkingLevel
from tempi.config.errors import ConfigError, describe_validation_error, read_json_object, read_text
from tempi.config.paths import expand_path, global_settings_paths, project_settings_paths
from tempi.config.project_trust import SECURITY_SETTINGS, project_trusted

QueueMode = Literal["one-at-a-time", "all"]

# pi's thinking level when neither the command line nor settings choose one.
DEFAULT_THINKING_LEVEL: ThinkingLevel = "medium"


class CompactionSettings(PiModel):
    enabled: bool = True
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


class ProviderRetrySettings(PiModel):
    # None: the SDK's default (two), as pi-ai leaves it.
    max_retries: int | None = Field(default=None, ge=0)


class RetrySettings(PiModel):
    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2_000
    max_delay_ms: int = 60_000
    provider: ProviderRetrySettings = Field(default_factory=ProviderRetrySettings)


class ImagesSettings(PiModel):
    block_images: bool = False


class Settings(PiModel):
    default_provider: str | None = None
    default_model: str | None = None
    default_thinking_level: ThinkingLevel | None = None
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    session_dir: str | None = None
    shell_path: str | None = None
    shell_command_prefix: str | None = None
    images: ImagesSettings = Field(default_factory=ImagesSettings)
    hide_thinking_block: bool = False
    quiet_startup: bool = False
    enable_skill_commands: bool = True
    autocomplete_max_visible: int = Field(default=5, ge=3, le=20)
    # tempi's own: a session that waits this long for a prompt closes (session_idle.py).
    session_idle_close_minutes: float | None = Field(default=None, ge=0)

    def session_dir_path(self, cwd: Path) -> Path | None:
        """`sessionDir` as a path (`~` expanded, relative to `cwd`), or None when unset."""
        return expand_path(self.session_dir, cwd) if self.session_dir else None


def merge_settings(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` wins; objects present on both sides are merged recursively."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_settings(merged[key], value)
        else:
            merged[key] = value
    return merged


def _upgrade_old_keys(data: dict[str, Any]) -> dict[str, Any]:
    # pi's older files call the steering mode "queueMode".
    if "queueMode" in data and "steeringMode" not in data:
        data = {**data}
        data["steeringMode"] = data.pop("queueMode")
    return data


def read_settings_file(path: Path) -> dict[str, Any]:
    """The file's JSON object (checked against Settings), or {} when it does not exist."""
    if not path.exists():
        return {}
    data = _upgrade_old_keys(read_json_object(path, read_text(path, "settings file"), "settings file"))
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"Invalid settings file {path}:\n{describe_validation_error(exc)}") from None
    return data


def load_settings(cwd: Path, global_path: Path | None = None) -> Settings:
    """The four files merged (`global_path`, when given, stands for both global ones)."""
    return Settings.model_validate(merged_settings(cwd, global_path))


def merged_settings(cwd: Path, global_path: Path | None = None) -> dict[str, Any]:
    """The four files' JSON merged in order, keys tempi does not model (`enabledModels`) kept."""
    return merge_settings(global_settings(global_path), project_settings(cwd))


def global_settings(global_path: Path | None = None) -> dict[str, Any]:
    """pi's global file with tempi's over it (or only `global_path`)."""
    merged: dict[str, Any] = {}
    for path in [global_path] if global_path else global_settings_paths():
        merged = merge_settings(merged, read_settings_file(path))
    return merged


def project_settings(cwd: Path) -> dict[str, Any]:
    """The project files' keys, `.tempi/` over `.pi/`; those that run code or choose paths
    only while the owner trusts the project (project_trust.py)."""
    merged: dict[str, Any] = {}
    trusted: bool | None = None
    for path in project_settings_paths(cwd):
        data = read_settings_file(path)
        if any(key in data for key in SECURITY_SETTINGS):
            trusted = project_trusted(cwd) if trusted is None else trusted
            if not trusted:
                data = {key: value for key, value in data.items() if key not in SECURITY_SETTINGS}
        merged = merge_settings(merged, data)
    return merged


def settings_at_call(cwd: Path) -> Settings:
    """The settings a model call or a bash run reads as it starts, as pi reads them each
    time: `images.blockImages`, `retry.provider.maxRetries`, `shellCommandPrefix` (an edit
    applies to the next call). A broken settings file leaves the defaults here: the front
    end is the one that reports it."""
    try:
        return load_settings(cwd)
    except ConfigError:
        return Settings()
