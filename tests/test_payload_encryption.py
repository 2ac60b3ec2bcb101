"""Encrypted history: with TEMPI_CODEC_KEYS a session's prompts, tool output and replies are
unreadable in Temporal (the temporal CLI without a codec), readable through a running
`tempi codec-server`, and keys rotate: a history written with key 1 still opens, and its
session goes on, once key 2 is added."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.codec import CodecKeyError, EncryptionCodec, load_key_ring
from tempi.workers.dev_server import temporal_binary
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env, write_models_json

KEY_1 = base64.b64encode(os.urandom(32)).decode()
KEY_2 = base64.b64encode(os.urandom(32)).decode()
FIRST_PROMPT = "PROMPT-ONE-marmalade-7731"
SECOND_PROMPT = "PROMPT-TWO-gooseberry-5512"
TOOL_OUTPUT = "TOOL-OUTPUT-42-quince"  # the command computes the 42: only its output holds this
REPLY = "REPLY-plum-0408"
SECRETS = [FIRST_PROMPT, SECOND_PROMPT, TOOL_OUTPUT, REPLY]
TOKEN = "codec-token-b7e1"
UI_ORIGIN = "http://ui.example:8233"


@dataclass
class EncryptedSession:
    session_id: str
    address: str
    tempi_output: str

    @property
    def workflow_id(self) -> str:
        return workflow_id_for(self.session_id)


@pytest.fixture(scope="module")
def encrypted_session(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, scripted_server: ScriptedLLMServer
) -> EncryptedSession:
    """One session: a turn with a tool under key 1, then a second turn once key 2 is added."""
    root = tmp_path_factory.mktemp("encrypted")
    home, work = root / "home", root / "project"
    work.mkdir()
    scenario = "encrypted-session"
    scripted_server.add_scenario(
        scenario,
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo TOOL-OUTPUT-$((6*7))-quince"}}]},
            {"text": REPLY},
            {"text": "second answer"},
        ],
    )
    write_models_json(home, scripted_server, scenario)
    args = ["--mode", "json", "--model", "mock/mock-model"]
    first = run_tempi(
        [*args, "-p", FIRST_PROMPT],
        cwd=work,
        env=tempi_env(home, temporal_address, TEMPI_CODEC_KEYS=f"k1:{KEY_1}"),
    )
    assert first.returncode == 0, first.stderr
    assert TOOL_OUTPUT in first.stdout and REPLY in first.stdout  # the session itself reads in the clear
    session_id = json.loads(first.stdout.splitlines()[0])["id"]
    rotated = tempi_env(home, temporal_address, TEMPI_CODEC_KEYS=f"k1:{KEY_1},k2:{KEY_2}")
    second = run_tempi([*args, "--session", session_id, "-p", SECOND_PROMPT], cwd=work, env=rotated)
    assert second.returncode == 0, second.stderr
    assert "second answer" in second.stdout
    # Its last tasks (the file's flush after the run) may still wait on the default queue,
    # where the next test's worker on this server, holding no keys, would take them up.
    terminate = ["workflow", "terminate", "-w", workflow_id_for(session_id), "--address", temporal_address]
    ended = subprocess.run(
        [temporal_binary(), *terminate, "--reason", "test over"], capture_output=True, text=True, timeout=60
    )
    assert ended.returncode == 0, ended.stderr
    return EncryptedSession(
        session_id, temporal_address, first.stdout + first.stderr + second.stdout + second.stderr
    )


@pytest.fixture(scope="module")
def codec_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`tempi codec-server` with both keys (from a file), a token and the UI's origin."""
    keys = tmp_path_factory.mktemp("codec") / "keys"
    keys.write_text(f"# oldest first\nk1:{KEY_1}\nk2:{KEY_2}\n")
    env = tempi_env(
        tmp_path_factory.mktemp("codec-home"),
        None,
        TEMPI_CODEC_KEYS_FILE=str(keys),
        TEMPI_CODEC_AUTH_TOKEN=TOKEN,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "codec-server", "--port", "0", "--cors-origin", UI_ORIGIN],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("tempi codec-server: http://"), line
        assert KEY_1 not in line and KEY_2 not in line
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(10)


def _show(session: EncryptedSession, *codec: str) -> dict[str, Any]:
    show = ["workflow", "show", "-w", session.workflow_id, "--address", session.address, "-o", "json"]
    proc = subprocess.run(
        [temporal_binary(), *show, *codec],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _payloads(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "data" in node and isinstance(node.get("metadata"), dict):
            yield node
        for value in node.values():
            yield from _payloads(value)
    elif isinstance(node, list):
        for value in node:
            yield from _payloads(value)


def _readable(history: dict[str, Any]) -> str:
    """Everything a reader of this history sees: each payload's data as text."""
    return "\n".join(base64.b64decode(p["data"]).decode(errors="replace") for p in _payloads(history))


def _key_ids(history: dict[str, Any]) -> set[str]:
    return {
        base64.b64decode(p["metadata"]["encryption-key-id"]).decode()
        for p in _payloads(history)
        if "encryption-key-id" in p["metadata"]
    }


def test_history_is_unreadable_without_the_codec_and_readable_through_the_codec_server(
    encrypted_session: EncryptedSession, codec_server: str
) -> None:
    raw = _show(encrypted_session)
    readable = _readable(raw)
    for secret in SECRETS:
        assert secret not in readable, f"{secret} is readable in the history"
    # Key 1 wrote the first turn, key 2 (the newest once added) the second.
    assert _key_ids(raw) == {"k1", "k2"}
    dumped = json.dumps(raw)
    for key in (KEY_1, KEY_2):
        assert key not in dumped and key not in encrypted_session.tempi_output

    decoded = _readable(
        _show(encrypted_session, "--codec-endpoint", codec_server, "--codec-auth", f"Bearer {TOKEN}")
    )
    for secret in SECRETS:
        assert secret in decoded, f"{secret} is not readable through tempi codec-server"


def test_codec_server_asks_for_its_token_and_lets_the_ui_origin_call_it(
    encrypted_session: EncryptedSession, codec_server: str
) -> None:
    encrypted = next(p for p in _payloads(_show(encrypted_session)) if "encryption-key-id" in p["metadata"])
    body = {"payloads": [encrypted]}
    assert httpx.post(f"{codec_server}/default/decode", json=body).status_code == 401
    preflight = httpx.options(
        f"{codec_server}/decode",
        headers={"Origin": UI_ORIGIN, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert "X-Namespace" in preflight.headers["Access-Control-Allow-Headers"]
    other = httpx.options(f"{codec_server}/decode", headers={"Origin": "http://elsewhere.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    answer = httpx.post(
        f"{codec_server}/decode",
        json=body,
        headers={"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default", "Origin": UI_ORIGIN},
    )
    assert answer.status_code == 200 and answer.headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    [opened] = answer.json()["payloads"]
    assert base64.b64decode(opened["metadata"]["encoding"]) == b"json/plain"


async def test_data_needs_the_key_it_was_written_with(
    encrypted_session: EncryptedSession, temporal_client: Client, tmp_path: Path
) -> None:
    history = await temporal_client.get_workflow_handle(encrypted_session.workflow_id).fetch_history()
    payloads = [
        p
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
        for p in e.activity_task_completed_event_attributes.result.payloads
    ]
    first: Payload = payloads[0]
    assert first.metadata["encryption-key-id"] == b"k1"
    # This test process has no keys: its client says what is missing instead of failing oddly.
    with pytest.raises(CodecKeyError, match=r"encrypted \(key 'k1'\).*TEMPI_CODEC_KEYS"):
        await temporal_client.data_converter.decode([first])

    # A codec server that dropped key 1 says so.
    env = tempi_env(tmp_path / "home", None, TEMPI_CODEC_KEYS=f"k2:{KEY_2}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "codec-server", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        url = proc.stderr.readline().split()[2]
        answer = httpx.post(f"{url}/decode", json={"payloads": [_payload_json(first)]})
    finally:
        proc.terminate()
        proc.wait(10)
    assert answer.status_code == 400
    message = answer.json()["message"]
    assert "key 'k1'" in message and "k2" in message and KEY_2 not in message


def _payload_json(payload: Payload) -> dict[str, Any]:
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()},
        "data": base64.b64encode(payload.data).decode(),
    }


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        pytest.param(f"k1:{KEY_1},k2:not base64!", "is not base64", id="not-base64"),
        pytest.param(f"k1:{base64.b64encode(b'short').decode()}", "is 5 bytes", id="wrong-length"),
    ],
)
def test_unusable_keys_stop_tempi_with_a_clear_error(
    tmp_path: Path, temporal_address: str, keys: str, says: str
) -> None:
    work = tmp_path / "project"
    work.mkdir()
    env = tempi_env(tmp_path / "home", temporal_address, TEMPI_CODEC_KEYS=keys)
    proc = run_tempi(["--model", "faux/demo", "-p", "hello"], cwd=work, env=env)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("tempi: TEMPI_CODEC_KEYS") and says in proc.stderr, proc.stderr
    assert KEY_1 not in proc.stderr + proc.stdout and KEY_2 not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        pytest.param(f"k1:{KEY_1},k1:{KEY_2}", "given twice", id="id-twice"),
        pytest.param(KEY_1, "ID:BASE64KEY", id="no-id"),
        pytest.param(" , ", "holds no key", id="empty"),
    ],
)
def test_key_ring_mistakes_are_named_without_the_keys(keys: str, says: str) -> None:
    with pytest.raises(CodecKeyError, match=says) as raised:
        load_key_ring({"TEMPI_CODEC_KEYS": keys})
    assert KEY_1 not in str(raised.value) and KEY_2 not in str(raised.value)


async def test_a_key_changed_under_its_old_id_is_named_as_such() -> None:
    sealed = await EncryptionCodec(load_key_ring({"TEMPI_CODEC_KEYS": f"k1:{KEY_1}"})).encode(
        [Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')]
    )
    swapped = EncryptionCodec(load_key_ring({"TEMPI_CODEC_KEYS": f"k1:{KEY_2}"}))
    with pytest.raises(CodecKeyError, match=r"key 'k1' .* was changed"):
        await swapped.decode(sealed)


def test_codec_server_without_keys_says_what_to_set(tmp_path: Path) -> None:
    proc = run_tempi(["codec-server"], cwd=tmp_path, env=tempi_env(tmp_path / "home", None))
    assert proc.returncode == 3
    assert "TEMPI_CODEC_KEYS" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_the_background_server_refuses_a_client_with_other_codec_keys(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()

    def tempi(keys: str | None, *args: str) -> subprocess.CompletedProcess[str]:
        extra = {"TEMPI_CODEC_KEYS": keys} if keys else {}
        return run_tempi(list(args), cwd=work, env=tempi_env(home, None, **extra))

    try:
        assert tempi(f"k1:{KEY_1}", "--model", "faux/demo", "-p", "hello").returncode == 0
        for keys, says in [
            (None, "encrypts with codec keys this command does not have"),
            (f"k2:{KEY_2}", "runs with other codec keys"),
        ]:
            refused = tempi(keys, "--model", "faux/demo", "-p", "hello")
            assert refused.returncode == 3, refused.stderr
            assert says in refused.stderr and "`tempi server stop`" in refused.stderr, refused.stderr
            assert KEY_1 not in refused.stderr and KEY_2 not in refused.stderr
        # As the message says: stopped, the server starts again with the next command's keys.
        assert tempi(None, "server", "stop").returncode == 0
        assert tempi(None, "--model", "faux/demo", "-p", "hello").returncode == 0
        refused = tempi(f"k1:{KEY_1}", "--model", "faux/demo", "-p", "hello")
        assert refused.returncode == 3 and "was started without codec keys" in refused.stderr, refused.stderr
    finally:
        tempi(None, "server", "stop")


async def test_the_encrypting_key_is_the_one_named_and_the_others_only_decrypt() -> None:
    plain = [Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')]
    keys = f"k1:{KEY_1},k2:{KEY_2}"
    phase_1 = EncryptionCodec(load_key_ring({"TEMPI_CODEC_KEYS": keys, "TEMPI_CODEC_ENCRYPT_KEY_ID": "k1"}))
    [sealed] = await phase_1.encode(plain)
    assert sealed.metadata["encryption-key-id"] == b"k1"
    # Phase 2 (the newest key encrypts by default) still opens what phase 1 wrote.
    phase_2 = EncryptionCodec(load_key_ring({"TEMPI_CODEC_KEYS": keys}))
    assert (await phase_2.decode([sealed])) == plain
    assert (await phase_2.encode(plain))[0].metadata["encryption-key-id"] == b"k2"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        pytest.param(
            {"TEMPI_CODEC_KEYS": f"k1:{KEY_1}", "TEMPI_CODEC_ENCRYPT_KEY_ID": "k2"},
            "TEMPI_CODEC_ENCRYPT_KEY_ID names key 'k2', which TEMPI_CODEC_KEYS does not hold (it has k1)",
            id="unknown-id",
        ),
        pytest.param(
            {"TEMPI_CODEC_ENCRYPT_KEY_ID": "k1"},
            "TEMPI_CODEC_ENCRYPT_KEY_ID is set ('k1') but this process has no codec keys",
            id="no-keys",
        ),
    ],
)
def test_an_encrypting_key_id_the_ring_lacks_is_named(env: dict[str, str], says: str) -> None:
    with pytest.raises(CodecKeyError, match=re.escape(says)) as raised:
        load_key_ring(env)
    assert KEY_1 not in str(raised.value)


def test_a_rotation_can_live_in_the_mounted_secret_files(tmp_path: Path) -> None:
    (tmp_path / "TEMPI_CODEC_KEYS").write_text(f"k1:{KEY_1}\nk2:{KEY_2}\n")
    (tmp_path / "TEMPI_CODEC_ENCRYPT_KEY_ID").write_text("k1\n")
    ring = load_key_ring({"TEMPI_SECRETS_DIR": str(tmp_path)})
    assert ring is not None and ring.describe() == "encrypts with k1; decrypt only: k2"
