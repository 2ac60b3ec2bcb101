"""Temporal connection settings read the standard way (temporalio.envconfig): a profile of a
temporal.toml takes a real `tempi` process to the server and namespace it names, and a
setting that cannot work stops tempi with a clear message, exit status 3, and no API key."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.temporal_client import STARTING_SERVER, connect, retry_while_starting, server_gone
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env, write_models_json

API_KEY = "tk-profile-secret-5f3a9c"
TEAM_NAMESPACE = "tempi-team"


async def _register_namespace(client: Client, name: str) -> None:
    try:
        await client.workflow_service.register_namespace(
            RegisterNamespaceRequest(namespace=name, workflow_execution_retention_period=timedelta(days=1))
        )
    except RPCError as err:
        if "already" not in str(err).lower():
            raise
    # The server's namespace cache learns of a new namespace within seconds.
    ns_client = await connect(client.service_client.config.target_host)
    for _ in range(100):
        try:
            await Client(ns_client.service_client, namespace=name).count_workflows()
            return
        except RPCError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"namespace {name} never became usable")


async def test_a_temporal_toml_profile_takes_tempi_to_its_server_and_namespace(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    await _register_namespace(temporal_client, TEAM_NAMESPACE)
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "temporal-profile"
    scripted_server.add_scenario(scenario, [{"text": "answered through the team profile"}])
    write_models_json(home, scripted_server, scenario)
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.default]\naddress = "127.0.0.1:1"\n\n'
        f'[profile.team]\naddress = "{temporal_address}"\nnamespace = "{TEAM_NAMESPACE}"\n'
    )
    env = tempi_env(
        home, None, TEMPORAL_CONFIG_FILE=str(config), TEMPORAL_PROFILE="team", TEMPI_CLIENT_WORKER="1"
    )
    proc = await asyncio.to_thread(
        run_tempi, ["--mode", "json", "--model", "mock/mock-model", "-p", "hello"], cwd=work, env=env
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-1]["type"] == "agent_end"
    assert "answered through the team profile" in proc.stdout
    # The session ran on the profile's server and namespace, not on an embedded server.
    assert not (home / "server.json").exists()
    team = Client(temporal_client.service_client, namespace=TEAM_NAMESPACE)
    described = await team.get_workflow_handle(workflow_id_for(events[0]["id"])).describe()
    assert described.workflow_type == "AgentSessionWorkflow"


BAD_SETTINGS = [
    pytest.param(
        {"TEMPORAL_PROFILE": "staging"},
        '[profile.prod]\naddress = "127.0.0.1:1"\n',
        "Profile 'staging' not found",
        id="missing-profile",
    ),
    pytest.param(
        {"TEMPORAL_PROFILE": "prod"},
        f'[profile.prod]\naddress = "127.0.0.1:1"\napi_key = "{API_KEY}\n',
        "TOML parse error at line 3",
        id="broken-toml-holding-an-api-key",
    ),
    pytest.param(
        {
            "TEMPORAL_ADDRESS": "127.0.0.1:1",
            "TEMPORAL_TLS_CERT": "/no/such/client.pem",
            "TEMPORAL_TLS_KEY": "/k",
        },
        None,
        "/no/such/client.pem",
        id="old-alias-names-a-missing-certificate",
    ),
    pytest.param(
        {"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_TLS_CLIENT_CERT_PATH": "/etc/hostname"},
        None,
        "TEMPORAL_TLS_CLIENT_KEY_PATH",
        id="certificate-without-key",
    ),
]


@pytest.mark.parametrize(("settings", "toml", "says"), BAD_SETTINGS)
def test_a_bad_connection_setting_is_a_clear_error_without_the_api_key(
    tmp_path: Path, settings: dict[str, str], toml: str | None, says: str
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    extra = dict(settings, TEMPORAL_API_KEY=API_KEY) if toml is None else dict(settings)
    if toml is not None:
        (tmp_path / "temporal.toml").write_text(toml)
        extra["TEMPORAL_CONFIG_FILE"] = str(tmp_path / "temporal.toml")
    proc = run_tempi(["--model", "faux/demo", "-p", "hello"], cwd=work, env=tempi_env(home, None, **extra))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("tempi: ") and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert API_KEY not in proc.stderr + proc.stdout
    # Nothing was started in its place.
    assert not (home / "server.json").exists()


def test_an_unreachable_server_is_reported_without_the_api_key(tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    env = tempi_env(tmp_path / "home", "127.0.0.1:1", TEMPORAL_API_KEY=API_KEY)
    proc = run_tempi(["--model", "faux/demo", "-p", "hello"], cwd=work, env=env)
    assert proc.returncode == 1
    assert "Cannot reach the Temporal server at 127.0.0.1:1" in proc.stderr, proc.stderr
    assert API_KEY not in proc.stderr + proc.stdout


async def test_a_server_still_starting_is_waited_for_and_a_refusal_is_not(temporal_client: Client) -> None:
    """A just-started server opens its port before its frontend is ready and answers
    "not healthy yet" meanwhile (seconds on a busy machine): tempi's embedded service must
    wait for it instead of exiting; any other failure is reported at once."""
    answers = [
        RuntimeError(f"Failed client connect: call error after connection: {STARTING_SERVER}"),
        RuntimeError(f"Failed client connect: call error after connection: {STARTING_SERVER}"),
    ]
    tries = 0

    async def attempt() -> Client:
        nonlocal tries
        tries += 1
        if answers:
            raise answers.pop(0)
        return temporal_client

    assert await retry_while_starting(attempt) is temporal_client
    assert tries == 3

    async def refused() -> Client:
        nonlocal tries
        tries += 1
        raise RuntimeError("Failed client connect: transport error: Connection refused")

    tries = 0
    with pytest.raises(RuntimeError, match="Connection refused"):
        await retry_while_starting(refused)
    assert tries == 1


def test_a_server_killed_mid_call_counts_as_gone_and_its_answers_do_not() -> None:
    # What a call in flight gets when the server process dies under it (seen in a pipeline
    # run whose server was killed: it exited 1 with "answered with an error: transport error").
    assert server_gone(RPCError("transport error", RPCStatusCode.UNKNOWN, b""))
    assert server_gone(RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b""))
    assert not server_gone(RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b""))
    assert not server_gone(RPCError("a handler raised", RPCStatusCode.UNKNOWN, b""))
