"""Who may call the scripted Bedrock endpoint: a SigV4-signed request or a bearer token.

A request signed with the scripted key pair below has its signature checked with botocore's
own signer, so a test proves the client signed what it sent; a request signed with any
other key (pi's recordings, a user's manual run) has only the form of its Authorization
header checked (algorithm, credential scope for service `bedrock`, signed headers).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

SCRIPTED_AWS_ACCESS_KEY_ID = "AKIASCRIPTEDBEDROCK1"
SCRIPTED_AWS_SECRET_ACCESS_KEY = "scripted/bedrock/secret/key/for/tests/0000"
# Refused as an unknown identity, the way AWS refuses a deleted key or a revoked token.
REVOKED_AWS_ACCESS_KEY_ID = "AKIAREVOKEDBEDROCK01"
REVOKED_BEARER_TOKEN = "revoked-bedrock-api-key"

_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[^/]+)"
    r"/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=(?P<signature>[0-9a-f]{64})$"
)


@dataclass(frozen=True)
class AuthRefusal:
    status: int
    error_type: str
    message: str


@dataclass(frozen=True)
class Signature:
    access_key: str
    region: str
    service: str
    signed_headers: list[str]
    signature: str


def parse_sigv4(authorization: str) -> Signature | None:
    match = _SIGV4.match(authorization)
    if match is None:
        return None
    return Signature(
        access_key=match["key"],
        region=match["region"],
        service=match["service"],
        signed_headers=match["signed"].split(";"),
        signature=match["signature"],
    )


def check_request(method: str, url: str, headers: dict[str, str], body: bytes) -> AuthRefusal | None:
    """None when the request may be answered; `headers` have lower-case names."""
    authorization = headers.get("authorization", "")
    if not authorization:
        return AuthRefusal(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    if authorization.startswith("Bearer "):
        if authorization.removeprefix("Bearer ").strip() in ("", REVOKED_BEARER_TOKEN):
            return AuthRefusal(
                403,
                "UnrecognizedClientException",
                "Invalid API Key format: Must start with pre-defined prefix",
            )
        return None
    signature = parse_sigv4(authorization)
    if signature is None or signature.service != "bedrock":
        return AuthRefusal(
            403,
            "IncompleteSignatureException",
            f"Authorization header requires a SigV4 signature for service bedrock: {authorization[:80]}",
        )
    if not {"host", "x-amz-date"} <= set(signature.signed_headers):
        return AuthRefusal(
            403, "IncompleteSignatureException", "The host and x-amz-date headers must be signed."
        )
    if signature.access_key == REVOKED_AWS_ACCESS_KEY_ID:
        return AuthRefusal(
            403, "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    claimed = headers.get("x-amz-content-sha256")
    if claimed not in (None, "UNSIGNED-PAYLOAD", hashlib.sha256(body).hexdigest()):
        # The signature covers this header instead of the body, so the two must agree.
        return AuthRefusal(
            400,
            "XAmzContentSHA256Mismatch",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        )
    if signature.access_key == SCRIPTED_AWS_ACCESS_KEY_ID and not _signature_matches(
        signature, method, url, headers, body
    ):
        return AuthRefusal(
            403,
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.",
        )
    return None


class _Verifier(SigV4Auth):
    """botocore's SigV4 signer, limited to the headers the client said it signed."""

    def __init__(self, signature: Signature, headers: dict[str, str]) -> None:
        credentials = Credentials(SCRIPTED_AWS_ACCESS_KEY_ID, SCRIPTED_AWS_SECRET_ACCESS_KEY)
        super().__init__(credentials, signature.service, signature.region)
        self._signed = {name: headers.get(name, "") for name in signature.signed_headers}

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        signed = HTTPHeaders()
        for name, value in self._signed.items():
            signed[name] = value
        return signed


def _signature_matches(
    signature: Signature, method: str, url: str, headers: dict[str, str], body: bytes
) -> bool:
    verifier = _Verifier(signature, headers)
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    request.context["timestamp"] = headers.get("x-amz-date", "")
    expected = verifier.signature(
        verifier.string_to_sign(request, verifier.canonical_request(request)), request
    )
    return hmac.compare_digest(expected, signature.signature)
