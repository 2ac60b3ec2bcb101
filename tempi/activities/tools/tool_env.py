"""The environment commands run by tools (bash, the user's `!cmd`, ripgrep) start with.

The worker's own environment holds provider keys, Temporal credentials, Slack and MCP
tokens. A command the model writes can print all of it with `env`, and what it prints
lands in the session file, the history and the next model request. So a tool gets only:

1. an allow-list of names a shell and the usual build tools need (paths, locale,
   terminal, temp dirs, CA bundles, proxies), and
2. the names the user lists in `TEMPI_TOOL_ENV` on the worker: comma-, colon- or
   space-separated, an entry ending in `*` is a prefix (`TEMPI_TOOL_ENV=GOFLAGS,NPM_CONFIG_*`).

Two filters apply on top, because a wide pattern or a convenient allow-list entry should
not leak a secret by accident:

- a name that looks secret (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, ...) passes
  only when `TEMPI_TOOL_ENV` names it exactly: listing it is the user's deliberate choice;
- a value that is a URL with a password in it (`http://user:pass@proxy:3128`, a private
  package index) passes only when named exactly, for the same reason; proxies without
  credentials pass, since tools that download (pip, npm, git, curl) need them.

`TEMPORAL_*` never passes: with those a command could drive every session on the cluster.
Nor does `TEMPI_CODEC_*`: the history's keys would let a command read every session.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TOOL_ENV_VARIABLE = "TEMPI_TOOL_ENV"

# When the worker has no PATH at all, commands still need to find the basics.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ALLOWED_NAMES: frozenset[str] = frozenset(
    {
        # who and where: a shell and most programs misbehave without these
        "PATH", "HOME", "USER", "LOGNAME", "SHELL",
        "TMPDIR", "TMP", "TEMP",
        "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
        # language and output: decoding of file names and program output depends on them
        "LANG", "LANGUAGE", "TZ",
        "TERM", "COLORTERM", "COLUMNS", "LINES", "NO_COLOR",
        # certificates: without them every HTTPS download fails behind a corporate CA
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT",
        # proxies (values holding a password are filtered below)
        "http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy",
        "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "ALL_PROXY", "NO_PROXY",
        # where toolchains are installed: paths only
        "JAVA_HOME", "GOROOT", "GOPATH", "CARGO_HOME", "RUSTUP_HOME", "NVM_DIR", "PYENV_ROOT",
    }
)  # fmt: skip
ALLOWED_PREFIXES: tuple[str, ...] = ("LC_",)

NEVER_PREFIXES: tuple[str, ...] = ("TEMPORAL_", "TEMPI_CODEC_")

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH(?!OR)|PRIVATE|COOKIE",
    re.IGNORECASE,
)
_URL_WITH_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def parse_tool_env(spec: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The exact names and the prefixes (entries ending in `*`) of a `TEMPI_TOOL_ENV` value."""
    names: set[str] = set()
    prefixes: list[str] = []
    for entry in re.split(r"[,:\s]+", spec):
        if not entry:
            continue
        if entry.endswith("*"):
            if entry.rstrip("*"):
                prefixes.append(entry.rstrip("*"))
        else:
            names.add(entry)
    return frozenset(names), tuple(prefixes)


def tool_environment(source: Mapping[str, str], extra: str | None = None) -> dict[str, str]:
    """The environment for a tool's command, chosen from `source` (the worker's).

    `extra` is a `TEMPI_TOOL_ENV` value; by default the one in `source`.
    """
    spec = source.get(TOOL_ENV_VARIABLE, "") if extra is None else extra
    exact, prefixes = parse_tool_env(spec)
    env: dict[str, str] = {}
    for name, value in source.items():
        if name.startswith(NEVER_PREFIXES):
            continue
        if name in exact:
            env[name] = value
            continue
        wanted = (
            name in ALLOWED_NAMES
            or name.startswith(ALLOWED_PREFIXES)
            or any(name.startswith(prefix) for prefix in prefixes)
        )
        if wanted and not looks_secret(name) and _URL_WITH_PASSWORD.search(value) is None:
            env[name] = value
    env.setdefault("PATH", DEFAULT_PATH)
    return env
