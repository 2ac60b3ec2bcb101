"""Encryption of everything tempi puts into Temporal's history: prompts, tool arguments and
results, events, failures. AES-GCM with a key ring, so keys rotate without losing old
histories: payloads are encrypted with the newest key and carry its id, and any key of the
ring decrypts.

Keys come from TEMPI_CODEC_KEYS, the file TEMPI_CODEC_KEYS_FILE names, or the file
TEMPI_CODEC_KEYS in TEMPI_SECRETS_DIR (config/secret_files.py): entries
`ID:BASE64KEY` (16, 24 or 32 bytes), separated by commas or lines, oldest first. Without
either, payloads stay as they are, and a client that meets an encrypted one says which key
it needs instead of failing on an unknown encoding."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes, PayloadCodec

from tempi.config.secret_files import held_secret, secret_in_dir
from tempi.workers.temporal_connection import TemporalSettingsError

KEYS_VARIABLE = "TEMPI_CODEC_KEYS"
KEYS_FILE_VARIABLE = "TEMPI_CODEC_KEYS_FILE"
ENCODING = b"binary/encrypted"
KEY_ID_FIELD = "encryption-key-id"
CIPHER_FIELD = "encryption-cipher"
CIPHER = b"AES-GCM"
NONCE_BYTES = 12
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class CodecKeyError(TemporalSettingsError):
    """Keys that cannot be used, or a payload no key of the ring opens. Never holds a key."""


@dataclass(frozen=True)
class KeyRing:
    """Keys by id, oldest first; the last one encrypts."""

    keys: tuple[tuple[str, bytes], ...] = field(repr=False)
    origin: str = KEYS_VARIABLE

    @property
    def ids(self) -> list[str]:
        return [key_id for key_id, _ in self.keys]

    def key(self, key_id: str) -> bytes | None:
        return next((key for kid, key in self.keys if kid == key_id), None)


def parse_keys(text: str, origin: str) -> KeyRing:
    keys: list[tuple[str, bytes]] = []
    entries = [e.strip() for e in re.split(r"[,\n]", text) if e.strip() and not e.strip().startswith("#")]
    for number, entry in enumerate(entries, 1):
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not _KEY_ID.fullmatch(key_id):
            raise CodecKeyError(
                f"{origin}: entry {number} is not `ID:BASE64KEY` (an id of letters, digits, '.', '_' "
                "or '-', then the key). Write e.g. `k1:$(openssl rand -base64 32)`."
            )
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CodecKeyError(
                f"{origin}: the key of '{key_id}' is not base64. Make one with `openssl rand -base64 32`."
            ) from None
        if len(key) not in (16, 24, 32):
            raise CodecKeyError(
                f"{origin}: the key of '{key_id}' is {len(key)} bytes; AES-GCM needs 16, 24 or 32 "
                "(`openssl rand -base64 32` makes a 32-byte one)."
            )
        if any(kid == key_id for kid, _ in keys):
            raise CodecKeyError(f"{origin}: key id '{key_id}' is given twice; every key needs its own id.")
        keys.append((key_id, key))
    if not keys:
        raise CodecKeyError(f"{origin} holds no key. Give `ID:BASE64KEY` entries, or unset it.")
    return KeyRing(tuple(keys), origin)


def load_key_ring(environ: Mapping[str, str] | None = None) -> KeyRing | None:
    """The ring the environment configures, or None when encryption is off."""
    env = os.environ if environ is None else environ
    inline, path = env.get(KEYS_VARIABLE), env.get(KEYS_FILE_VARIABLE)
    if not inline and not path:
        # What `tempi worker` took out of its environment, or TEMPI_SECRETS_DIR's file.
        inline = (held_secret(KEYS_VARIABLE) if environ is None else None) or secret_in_dir(
            KEYS_VARIABLE, environ
        )
    if inline and path:
        raise CodecKeyError(f"set {KEYS_VARIABLE} or {KEYS_FILE_VARIABLE}, not both.")
    if path:
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise CodecKeyError(
                f"{KEYS_FILE_VARIABLE} names {path}, which cannot be read ({err.strerror})."
            ) from None
        return parse_keys(text, f"{KEYS_FILE_VARIABLE} ({path})")
    if inline:
        return parse_keys(inline, KEYS_VARIABLE)
    return None


def ring_fingerprint(ring: KeyRing | None) -> str:
    """Tells rings apart without revealing them: the same for the same keys and ids, empty
    without encryption. A process that serves others records it for them to compare."""
    if ring is None:
        return ""
    digest = hashlib.sha256()
    for key_id, key in ring.keys:
        digest.update(key_id.encode() + b"\0" + hashlib.sha256(key).digest())
    return digest.hexdigest()[:16]


def mismatch(service_pid: int, theirs: str, mine: str) -> CodecKeyError | None:
    """Why a client cannot use the background service's workers, if their keys differ
    (fingerprints from `ring_fingerprint`)."""
    if theirs == mine:
        return None
    if not theirs:
        state = "was started without codec keys, and this command has some"
    elif not mine:
        state = (
            f"encrypts with codec keys this command does not have (give it the same {KEYS_VARIABLE} "
            f"or {KEYS_FILE_VARIABLE})"
        )
    else:
        state = "runs with other codec keys than this command"
    return CodecKeyError(
        f"The background tempi server (pid {service_pid}) {state}. Stop it with `tempi server stop` "
        "and run this again: it starts anew with this command's keys."
    )


class EncryptionCodec(PayloadCodec):
    def __init__(self, ring: KeyRing | None) -> None:
        self._ring = ring

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if self._ring is None:
            return list(payloads)
        # Imported here: without a ring (most processes) the cipher is never loaded.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id, key = self._ring.keys[-1]
        aead = AESGCM(key)
        out = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            sealed = aead.encrypt(nonce, payload.SerializeToString(), key_id.encode())
            out.append(
                Payload(
                    metadata={"encoding": ENCODING, KEY_ID_FIELD: key_id.encode(), CIPHER_FIELD: CIPHER},
                    data=nonce + sealed,
                )
            )
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._open(p) if p.metadata.get("encoding") == ENCODING else p for p in payloads]

    def _open(self, payload: Payload) -> Payload:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id = payload.metadata.get(KEY_ID_FIELD, b"").decode(errors="replace")
        if self._ring is None:
            raise CodecKeyError(
                f"this Temporal data is encrypted (key '{key_id}'), and this process has no keys: "
                f"set {KEYS_VARIABLE} or {KEYS_FILE_VARIABLE} as on the workers."
            )
        key = self._ring.key(key_id)
        if key is None:
            raise CodecKeyError(
                f"this Temporal data is encrypted with key '{key_id}', which {self._ring.origin} does not "
                f"hold (it has {', '.join(self._ring.ids)}). Keep old keys in the ring when adding new ones."
            )
        data = payload.data
        try:
            plain = AESGCM(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode())
        except InvalidTag:
            raise CodecKeyError(
                f"key '{key_id}' of {self._ring.origin} does not open this Temporal data: the key with "
                "that id was changed. A key id must always name the same key."
            ) from None
        opened = Payload()
        opened.ParseFromString(plain)
        return opened


def data_converter(ring: KeyRing | None) -> DataConverter:
    """tempi's converter (pydantic models), with the codec; with a ring, failure messages and
    stack traces are encrypted too, since a tool's error can quote the files it read."""
    if ring is None:
        return replace(pydantic_data_converter, payload_codec=EncryptionCodec(None))
    return replace(
        pydantic_data_converter,
        payload_codec=EncryptionCodec(ring),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
