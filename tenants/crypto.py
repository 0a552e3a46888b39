"""AES-GCM envelope encryption, free of Django.

Content is sealed with an organization's data key; data keys are wrapped with a master key.
Both bind context as associated data, so a ciphertext copied to another organization's row, or
another row of the same organization, fails to open instead of decrypting there.

Sealed blob: b"\\x01" | key version (4 bytes, big-endian) | nonce (12 bytes) | ciphertext+tag.
"""

import base64
import binascii
import os
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FORMAT = 1
_HEADER = struct.Struct(">BI")
NONCE_BYTES = 12


class DecryptionError(Exception):
    """The ciphertext does not open with this key and context (wrong key, wrong record, tampered)."""


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def seal(key: bytes, version: int, plaintext: bytes, context: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    header = _HEADER.pack(FORMAT, version)
    return header + nonce + AESGCM(key).encrypt(nonce, plaintext, header + context)


def sealed_version(blob: bytes) -> int:
    fmt, version = _HEADER.unpack_from(blob)
    if fmt != FORMAT:
        raise DecryptionError(f"Unknown ciphertext format {fmt}.")
    return version


def open_sealed(key: bytes, blob: bytes, context: bytes) -> bytes:
    header, nonce, body = blob[: _HEADER.size], blob[_HEADER.size : _HEADER.size + NONCE_BYTES], blob[_HEADER.size + NONCE_BYTES :]
    try:
        return AESGCM(key).decrypt(nonce, body, header + context)
    except InvalidTag:
        raise DecryptionError("Ciphertext does not open with this key and context.") from None


@dataclass(frozen=True)
class MasterKeyring:
    """Master keys by id; the first is current and wraps new data keys."""

    keys: dict[str, bytes]
    current_id: str

    @classmethod
    def parse(cls, spec: str) -> "MasterKeyring":
        """Parse "id:base64key,id:base64key" (current first), refusing anything malformed."""
        keys: dict[str, bytes] = {}
        for entry in spec.split(","):
            key_id, sep, encoded = entry.strip().partition(":")
            if not sep or not key_id:
                raise ValueError("Master keys are written 'id:base64key', separated by commas.")
            try:
                key = base64.b64decode(encoded, validate=True)
            except binascii.Error:
                raise ValueError(f"Master key {key_id!r} is not valid base64.") from None
            if len(key) != 32:
                raise ValueError(f"Master key {key_id!r} must be 32 bytes, not {len(key)}.")
            if key_id in keys:
                raise ValueError(f"Master key id {key_id!r} appears twice.")
            keys[key_id] = key
        return cls(keys=keys, current_id=next(iter(keys)))

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        return self.current_id, seal(self.keys[self.current_id], 0, data_key, b"wrap|" + context)

    def unwrap(self, master_key_id: str, wrapped: bytes, context: bytes) -> bytes:
        if master_key_id not in self.keys:
            raise DecryptionError(f"Master key {master_key_id!r} is not configured.")
        return open_sealed(self.keys[master_key_id], wrapped, b"wrap|" + context)
