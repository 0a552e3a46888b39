import base64

import pytest

from tenants import crypto


def test_sealed_content_opens_with_its_key_and_context():
    key = crypto.new_data_key()
    blob = crypto.seal(key, 3, b"payload", b"ctx")
    assert crypto.sealed_version(blob) == 3
    assert crypto.open_sealed(key, blob, b"ctx") == b"payload"


@pytest.mark.parametrize("wrong", ["key", "context", "tampered"])
def test_sealed_content_does_not_open_with_anything_else(wrong):
    key = crypto.new_data_key()
    blob = crypto.seal(key, 1, b"payload", b"ctx")
    if wrong == "key":
        key = crypto.new_data_key()
    if wrong == "tampered":
        blob = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(crypto.DecryptionError):
        crypto.open_sealed(key, blob, b"other" if wrong == "context" else b"ctx")


def test_two_seals_of_the_same_text_differ():
    key = crypto.new_data_key()
    assert crypto.seal(key, 1, b"same", b"c") != crypto.seal(key, 1, b"same", b"c")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_the_keyring_wraps_with_the_first_key_and_unwraps_with_any():
    ring = crypto.MasterKeyring.parse(f"new:{_b64(b'n' * 32)},old:{_b64(b'o' * 32)}")
    master_id, wrapped = ring.wrap(b"d" * 32, b"org|1")
    assert master_id == "new"
    assert ring.unwrap("new", wrapped, b"org|1") == b"d" * 32
    with pytest.raises(crypto.DecryptionError):
        ring.unwrap("new", wrapped, b"org|2")


@pytest.mark.parametrize(
    "spec, complaint",
    [
        ("no-colon", "id:base64key"),
        (f"a:{_b64(b'short')}", "32 bytes"),
        ("a:!!!notbase64", "base64"),
        (f"a:{_b64(b'k' * 32)},a:{_b64(b'k' * 32)}", "twice"),
    ],
)
def test_a_malformed_master_key_setting_fails_loudly(spec, complaint):
    with pytest.raises(ValueError, match=complaint):
        crypto.MasterKeyring.parse(spec)
