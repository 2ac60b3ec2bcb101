"""Which sandboxes this worker runs tools in: the operator's choice, not the session's.

A session names its sandbox (`--sandbox local|bwrap|docker|container:NAME`), but whoever can
start a session on a shared queue chooses that. `TEMPI_ALLOWED_SANDBOXES=bwrap,docker` on a
worker makes it refuse the rest: with `local` a command runs as the worker's user on its
machine, next to its secret files and every project it serves. Unset, every kind is allowed
(one user's own machine). Read at each call, like the other tool settings."""

from __future__ import annotations

import os
from typing import get_args

from temporalio.exceptions import ApplicationError

from tempi.workflows.session_types import SandboxKind

ALLOWED_SANDBOXES_ENV = "TEMPI_ALLOWED_SANDBOXES"
SANDBOX_NOT_ALLOWED = "SandboxNotAllowed"
KINDS: tuple[str, ...] = get_args(SandboxKind)


class SandboxPolicyError(ValueError):
    """TEMPI_ALLOWED_SANDBOXES names no sandbox tempi knows."""


def allowed_sandboxes() -> frozenset[str]:
    raw = os.environ.get(ALLOWED_SANDBOXES_ENV, "").strip()
    if not raw:
        return frozenset(KINDS)
    kinds = {kind.strip().lower() for kind in raw.replace(" ", ",").split(",") if kind.strip()}
    unknown = sorted(kinds - set(KINDS))
    if unknown or not kinds:
        raise SandboxPolicyError(
            f"{ALLOWED_SANDBOXES_ENV}={raw!r}: {', '.join(unknown) or 'nothing'} is not a sandbox; "
            f"list some of {', '.join(KINDS)}, e.g. {ALLOWED_SANDBOXES_ENV}=bwrap,docker"
        )
    return frozenset(kinds)


def refusal(kind: str) -> str | None:
    """Why this worker will not run tools in the sandbox `kind`; None when it will."""
    try:
        allowed = allowed_sandboxes()
    except SandboxPolicyError as err:
        return f"This worker runs no tools: its setting is unusable ({err})."
    if kind in allowed:
        return None
    ordered = [k for k in KINDS if k in allowed]
    return (
        f"This worker does not run tools in the {kind!r} sandbox: its operator allows only "
        f"{', '.join(ordered)} ({ALLOWED_SANDBOXES_ENV}). Start the session with "
        f"--sandbox {ordered[0]}."
    )


def check_sandbox(kind: str) -> None:
    """Fail the activity, for good, when this worker does not run tools in `kind`."""
    if (reason := refusal(kind)) is not None:
        raise ApplicationError(reason, type=SANDBOX_NOT_ALLOWED, non_retryable=True)
