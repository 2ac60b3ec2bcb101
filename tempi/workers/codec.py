"""Encryption of everything tempi puts into Temporal's history: prompts, tool arguments and
results, events, failures. AES-GCM with a key ring, so keys rotate without losing old
histories: payloads are encrypted with one key of the ring and carry its id, and any key of
the ring decrypts.

Keys come from TEMPI_CODEC_KEYS, the file TEMPI_CODEC_KEYS_FILE names, or the file
TEMPI_CODEC_KEYS in TEMPI_SECRETS_DIR (config/secret_files.py): entries
`ID:BASE64KEY` (16, 24 or 32 bytes), separated by commas or lines, oldest first. The newest
encrypts unless TEMPI_CODEC_ENCRYPT_KEY_ID (a variable, or a file in TEMPI_SECRETS_DIR) names
another: that is how a rotation hands every
process a new key to decrypt with before any process encrypts with it (docs/operations.md,
"Rotating keys"). Without keys, payloads stay as they are, and a client that meets an
encrypted one says which key it needs instead of failing on an unknown encoding."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
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
ENCRYPT_KEY_VARIABLE = "TEMPI_CODEC_ENCRYPT_KEY_ID"
ENCODING = b"binary/encrypted"
KEY_ID_FIELD = "encryption-key-id"
CIPHER_FIELD = "encryption-cipher"
CIPHER = b"AES-GCM"
NONCE_BYTES = 12
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Where a payload no key opens is reported, once per key id and process. Silent unless a
# process says where (`tempi worker` writes it to its stderr): a worker's failed workflow
# task is otherwise visible only as an encrypted failure in the history it could not read.
UNKNOWN_KEY_LOG = logging.getLogger("tempi.codec")
UNKNOWN_KEY_LOG.addHandler(logging.NullHandler())
UNKNOWN_KEY_LOG.propagate = False


class CodecKeyError(TemporalSettingsError):
    """Keys that cannot be used, or a payload no key of the ring opens. Never holds a key."""


@dataclass(frozen=True)
class KeyRing:
    """Keys by id, oldest first; `encrypt_id` encrypts (the last one unless chosen), the
    others only decrypt."""

    keys: tuple[tuple[str, bytes], ...] = field(repr=False)
    origin: str = KEYS_VARIABLE
    encrypt_id: str = ""

    def __post_init__(self) -> None:
        if not self.encrypt_id:
            object.__setattr__(self, "encrypt_id", self.keys[-1][0])

    @property
    def ids(self) -> list[str]:
        return [key_id for key_id, _ in self.keys]

    @property
    def encrypting(self) -> tuple[str, bytes]:
        return next(entry for entry in self.keys if entry[0] == self.encrypt_id)

    @property
    def decrypt_only(self) -> list[str]:
        return [key_id for key_id in self.ids if key_id != self.encrypt_id]

    def describe(self) -> str:
        """For a start-up line: ids only, never a key."""
        others = f"; decrypt only: {', '.join(self.decrypt_only)}" if self.decrypt_only else ""
        return f"encrypts with {self.encrypt_id}{others}"

    def key(self, key_id: str) -> bytes | None:
        return next((key for kid, key in self.keys if kid == key_id), None)


def parse_keys(text: str, origin: str, encrypt_id: str | None = None) -> KeyRing:
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
    if encrypt_id is not None and not any(kid == encrypt_id for kid, _ in keys):
        raise CodecKeyError(
            f"{ENCRYPT_KEY_VARIABLE} names key '{encrypt_id}', which {origin} does not hold (it has "
            f"{', '.join(kid for kid, _ in keys)}). Name one of those, or add '{encrypt_id}' to the ring."
        )
    return KeyRing(tuple(keys), origin, encrypt_id or "")


def load_key_ring(environ: Mapping[str, str] | None = None) -> KeyRing | None:
    """The ring the environment configures, or None when encryption is off."""
    env = os.environ if environ is None else environ
    inline, path = env.get(KEYS_VARIABLE), env.get(KEYS_FILE_VARIABLE)
    # Beside the keys when they are files (a Secret mounted as TEMPI_SECRETS_DIR), so one
    # Secret holds a rotation's state.
    encrypt_id = (
        env.get(ENCRYPT_KEY_VARIABLE, "").strip() or secret_in_dir(ENCRYPT_KEY_VARIABLE, environ)
    ) or None
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
        return parse_keys(text, f"{KEYS_FILE_VARIABLE} ({path})", encrypt_id)
    if inline:
        return parse_keys(inline, KEYS_VARIABLE, encrypt_id)
    if encrypt_id:
        raise CodecKeyError(
            f"{ENCRYPT_KEY_VARIABLE} is set ('{encrypt_id}') but this process has no codec keys: set "
            f"{KEYS_VARIABLE} or {KEYS_FILE_VARIABLE} as on the workers, or unset {ENCRYPT_KEY_VARIABLE}."
        )
    return None


def ring_fingerprint(ring: KeyRing | None) -> str:
    """Tells rings apart without revealing them: the same for the same keys and ids, empty
    without encryption. A process that serves others records it for them to compare."""
    if ring is None:
        return ""
    digest = hashlib.sha256()
    for key_id, key in ring.keys:
        digest.update(key_id.encode() + b"\0" + hashlib.sha256(key).digest())
    if ring.encrypt_id != ring.ids[-1]:
        # Only when chosen, so a ring that encrypts with its newest key (the default) keeps the
        # fingerprint it had before the encrypting key could be chosen.
        digest.update(b"encrypt\0" + ring.encrypt_id.encode())
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
        state = f"runs with other codec keys (or another {ENCRYPT_KEY_VARIABLE}) than this command"
    return CodecKeyError(
        f"The background tempi server (pid {service_pid}) {state}. Stop it with `tempi server stop` "
        "and run this again: it starts anew with this command's keys."
    )


class EncryptionCodec(PayloadCodec):
    def __init__(self, ring: KeyRing | None) -> None:
        self._ring = ring
        self._reported: set[str] = set()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if self._ring is None:
            return list(payloads)
        # Imported here: without a ring (most processes) the cipher is never loaded.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id, key = self._ring.encrypting
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
            raise self._report(
                key_id,
                CodecKeyError(
                    f"this Temporal data is encrypted with key '{key_id}', which {self._ring.origin} does not "
                    f"hold (it has {', '.join(self._ring.ids)}): add '{key_id}' to {self._ring.origin} here. "
                    f"If '{key_id}' is a new key, another process already encrypts with it: rotate in two "
                    f"phases, every process holding it first with {ENCRYPT_KEY_VARIABLE} naming the old key "
                    '(docs/operations.md, "Rotating keys"). If it is an old key, keep it while histories use it.'
                ),
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

    def _report(self, key_id: str, err: CodecKeyError) -> CodecKeyError:
        if key_id not in self._reported:
            self._reported.add(key_id)
            UNKNOWN_KEY_LOG.error("%s", err)
        return err


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
