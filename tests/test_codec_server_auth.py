"""`tempi codec-server` for a real Temporal UI, over real HTTP: a CORS preflight is answered
for the UI's origin only; a caller needs the server's token (the `temporal` CLI) or, from the
UI with codec.passAccessToken, an access token the OIDC issuer vouches for, of a user the
server allows; and on an address beyond loopback it will not start without one of them."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from temporalio.api.common.v1 import Payload

from tempi.workers.codec import EncryptionCodec, load_key_ring
from tempi.workers.dev_server import free_port
from tests.conftest import run_tempi, tempi_env

KEY = base64.b64encode(os.urandom(32)).decode()
KEYS = f"k1:{KEY}"
TOKEN = "cli-token-5d1f"
UI_ORIGIN = "https://temporal.example.com"
# Access tokens the fake issuer knows, and whose they are.
USERS = {"at-alice-93": "alice@example.com", "at-mallory-17": "mallory@elsewhere.example"}


class FakeIssuer:
    """An OIDC issuer: its discovery document and a userinfo endpoint that knows USERS."""

    def __init__(self) -> None:
        self.userinfo_calls = 0
        self.url = ""

    async def discovery(self, _request: web.Request) -> web.Response:
        return web.json_response({"issuer": self.url, "userinfo_endpoint": f"{self.url}/userinfo"})

    async def userinfo(self, request: web.Request) -> web.Response:
        self.userinfo_calls += 1
        email = USERS.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
        if email is None:
            return web.json_response({"error": "invalid_token"}, status=401)
        return web.json_response({"sub": email.split("@")[0], "email": email})


@pytest.fixture
async def issuer() -> AsyncIterator[FakeIssuer]:
    fake = FakeIssuer()
    app = web.Application()
    app.router.add_get("/.well-known/openid-configuration", fake.discovery)
    app.router.add_get("/userinfo", fake.userinfo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()


@contextmanager
def codec_server(tmp_path: Path, *args: str, **env: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "codec-server", "--port", "0", *args],
        env=tempi_env(tmp_path / "home", None, TEMPI_CODEC_KEYS=KEYS, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("tempi codec-server: http://"), line
        assert KEY not in line and TOKEN not in line
        yield line.split()[2].replace("0.0.0.0", "127.0.0.1")
    finally:
        proc.terminate()
        proc.wait(10)


async def _sealed() -> dict[str, Any]:
    """A payload as the workers write it, as protobuf JSON."""
    [payload] = await EncryptionCodec(load_key_ring({"TEMPI_CODEC_KEYS": KEYS})).encode(
        [Payload(metadata={"encoding": b"json/plain"}, data=b'"secret prompt"')]
    )
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()},
        "data": base64.b64encode(payload.data).decode(),
    }


def _opened(answer: httpx.Response) -> bytes:
    assert answer.status_code == 200, answer.text
    [payload] = answer.json()["payloads"]
    return base64.b64decode(payload["data"])


async def test_preflight_is_answered_for_the_configured_origin_only(tmp_path: Path) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    # The origin from the environment, as the compose and Kubernetes manifests set it.
    with codec_server(tmp_path, TEMPI_CODEC_AUTH_TOKEN=TOKEN, TEMPI_CODEC_CORS_ORIGINS=UI_ORIGIN) as url:
        async with httpx.AsyncClient() as http:
            ui = await http.options(f"{url}/default/decode", headers={"Origin": UI_ORIGIN, **preflight})
            other = await http.options(
                f"{url}/default/decode", headers={"Origin": "https://evil.example", **preflight}
            )
    assert ui.status_code == 204
    assert ui.headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert "Authorization" in ui.headers["Access-Control-Allow-Headers"]
    assert "X-Namespace" in ui.headers["Access-Control-Allow-Headers"]
    assert other.status_code == 403 and "Access-Control-Allow-Origin" not in other.headers
    assert "TEMPI_CODEC_CORS_ORIGINS" in other.json()["message"]


async def test_the_cli_token_is_required_and_opens_the_payload(tmp_path: Path) -> None:
    body = {"payloads": [await _sealed()]}
    with codec_server(tmp_path, TEMPI_CODEC_AUTH_TOKEN=TOKEN) as url:
        async with httpx.AsyncClient() as http:
            missing = await http.post(f"{url}/decode", json=body)
            wrong = await http.post(f"{url}/decode", json=body, headers={"Authorization": "Bearer nope"})
            right = await http.post(f"{url}/decode", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert missing.status_code == 401 and wrong.status_code == 401
    assert b"secret prompt" not in missing.content + wrong.content
    assert _opened(right) == b'"secret prompt"'


async def test_the_uis_access_token_is_checked_with_the_issuer(tmp_path: Path, issuer: FakeIssuer) -> None:
    body = {"payloads": [await _sealed()]}

    def ui_headers(access_token: str) -> dict[str, str]:
        # What the Temporal UI sends with codec.passAccessToken.
        return {"Authorization": f"Bearer {access_token}", "X-Namespace": "default", "Origin": UI_ORIGIN}

    with codec_server(
        tmp_path,
        "--host", "0.0.0.0", "--cors-origin", UI_ORIGIN,
        TEMPI_CODEC_OIDC_ISSUER=issuer.url, TEMPI_CODEC_OIDC_ALLOWED="@example.com",
    ) as url:  # fmt: skip
        async with httpx.AsyncClient() as http:
            alice = [await http.post(f"{url}/default/decode", json=body, headers=ui_headers("at-alice-93"))]
            alice.append(
                await http.post(f"{url}/default/decode", json=body, headers=ui_headers("at-alice-93"))
            )
            forged = await http.post(f"{url}/default/decode", json=body, headers=ui_headers("at-forged-00"))
            mallory = await http.post(f"{url}/default/decode", json=body, headers=ui_headers("at-mallory-17"))
    for answer in alice:
        assert _opened(answer) == b'"secret prompt"'
        assert answer.headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert forged.status_code == 401
    assert mallory.status_code == 403 and "TEMPI_CODEC_OIDC_ALLOWED" in mallory.json()["message"]
    assert b"secret prompt" not in forged.content + mallory.content
    # The page's burst of decode calls asked the issuer once per token.
    assert issuer.userinfo_calls == 3


def test_it_will_not_serve_beyond_loopback_without_authentication(tmp_path: Path) -> None:
    proc = run_tempi(
        ["codec-server", "--host", "0.0.0.0", "--port", "0"],
        cwd=tmp_path,
        env=tempi_env(tmp_path / "home", None, TEMPI_CODEC_KEYS=KEYS),
        timeout=30,
    )
    assert proc.returncode == 3, proc.stderr
    said = proc.stderr
    assert "will not serve decrypted history on 0.0.0.0 without authentication" in said
    assert "TEMPI_CODEC_AUTH_TOKEN" in said and "TEMPI_CODEC_OIDC_ISSUER" in said
    assert "Traceback" not in said and KEY not in said


def test_an_issuer_without_an_allow_list_is_refused_at_start(tmp_path: Path) -> None:
    proc = run_tempi(
        ["codec-server", "--port", "0"],
        cwd=tmp_path,
        env=tempi_env(
            tmp_path / "home", None, TEMPI_CODEC_KEYS=KEYS, TEMPI_CODEC_OIDC_ISSUER="https://id.example.com"
        ),
        timeout=30,
    )
    assert proc.returncode == 3 and "set TEMPI_CODEC_OIDC_ALLOWED" in proc.stderr, proc.stderr
