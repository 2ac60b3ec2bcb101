"""A Worker Deployment's first build becomes current by itself.

With versioning on, a new session starts on the deployment's current build; a deployment that
has none (a fresh install: the first workers just registered it) sends new sessions to
unversioned workers, of which there are none, and they wait forever without a word. So a
`tempi worker` whose deployment has no current build makes its own current, once the server
knows it. A deployment that has one is never touched: choosing the next build is the
operator's step (docs/operations.md, "Upgrading workers")."""

from __future__ import annotations

import asyncio
import time

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

# The server registers a version when its first poll arrives; until then it is unknown.
_NOT_YET = (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.ABORTED)


async def current_build(client: Client, deployment: str) -> tuple[str | None, bytes]:
    """The deployment's current build (None: it has none) and the token that changes it."""
    described = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment)
    )
    current = described.worker_deployment_info.routing_config.current_deployment_version
    return current.build_id or None, described.conflict_token


async def adopt_if_first(client: Client, deployment: str, build: str, timeout: float = 60) -> bool:
    """Make `build` current when `deployment` has no current build; True when this call did.
    The conflict token makes workers of a new deployment that start together agree."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            current, token = await current_build(client, deployment)
            if current is not None:
                return False
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=deployment,
                    build_id=build,
                    conflict_token=token,
                    identity=client.identity,
                )
            )
            return True
        except RPCError as err:
            if err.status not in _NOT_YET or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)
