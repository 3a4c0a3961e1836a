"""SCRAM-SHA-256 and SCRAM-SHA-512 credentials (RFC 5802 derivation, Kafka's text form) and users in a real ZooKeeper."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from lakelog.security.errors import InvalidCredentialError, UnknownUserError
from lakelog.security.scram import ScramCredential, verify_password
from lakelog.security.user_credentials import USERS_PATH, UserCredentials, credential_of, user_path


def test_the_keys_are_rfc_5802s_and_the_password_is_checked():
    salt = b"0123456789abcdef"
    c = ScramCredential.from_password("pencil", salt=salt)
    salted = hashlib.pbkdf2_hmac("sha512", b"pencil", salt, 4096)
    assert c.stored_key == hashlib.sha512(hmac.new(salted, b"Client Key", hashlib.sha512).digest()).digest()
    assert c.server_key == hmac.new(salted, b"Server Key", hashlib.sha512).digest()
    assert verify_password(c, "pencil") and not verify_password(c, "pencil ") and not verify_password(c, "")
    text = c.to_text()
    assert text.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == c
    # a fresh random salt each time: the same password gives another credential
    assert ScramCredential.from_password("pencil").salt != ScramCredential.from_password("pencil").salt
    with pytest.raises(InvalidCredentialError, match="iterations must be 4096-16384"):
        ScramCredential.from_password("x", iterations=1000)
    with pytest.raises(InvalidCredentialError, match="must not be empty"):
        ScramCredential.from_password("")
    with pytest.raises(InvalidCredentialError, match="Not a SCRAM-SHA-512 credential"):
        ScramCredential.from_text("salt=AAAA,iterations=4096")


def test_users_in_zookeeper_in_kafkas_json(zk_client):
    users = UserCredentials(zk_client)
    users.upsert("alice", "s3cret")
    users.upsert("svc/etl.v2", "other", iterations=8192)  # any name is a valid znode name
    assert users.names() == ["alice", "svc/etl.v2"]
    data, _ = zk_client.get(f"{USERS_PATH}/alice")
    doc = json.loads(data)
    assert doc["version"] == 1 and doc["config"]["SCRAM-SHA-512"].endswith("iterations=4096")
    assert b"s3cret" not in data
    assert verify_password(credential_of(data), "s3cret")
    assert user_path("svc/etl.v2").endswith("/svc%2Fetl%2Ev2")
    assert users.get("svc/etl.v2").iterations == 8192

    users.upsert("alice", "n3w")  # a new password replaces the old one
    assert verify_password(users.get("alice"), "n3w") and not verify_password(users.get("alice"), "s3cret")
    users.delete("alice")
    assert users.names() == ["svc/etl.v2"]
    with pytest.raises(UnknownUserError, match="No user 'alice'"):
        users.get("alice")
    with pytest.raises(UnknownUserError):
        users.delete("alice")
    with pytest.raises(InvalidCredentialError, match="Invalid user name"):
        users.upsert(" bob", "x")


def test_a_password_gives_a_credential_per_scram_mechanism_as_kafka_stores_them(zk_client):
    """Setting a password writes SCRAM-SHA-256 and SCRAM-SHA-512 credentials, each with its own salt and
    the mechanism's hash (what the Kafka listener's SASL/SCRAM exchanges check); deleting the user removes
    both."""
    salt = b"0123456789abcdef"
    c = ScramCredential.from_password("pencil", salt=salt, mechanism="SCRAM-SHA-256")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    assert c.stored_key == hashlib.sha256(hmac.new(salted, b"Client Key", hashlib.sha256).digest()).digest()
    assert verify_password(c, "pencil") and not verify_password(c, "pencil ")
    assert ScramCredential.from_text(c.to_text(), mechanism="SCRAM-SHA-256") == c
    with pytest.raises(InvalidCredentialError, match="Unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        ScramCredential.from_password("x", mechanism="SCRAM-SHA-1")

    users = UserCredentials(zk_client)
    users.upsert("carol", "s3cret", iterations=8192)
    data, _ = zk_client.get(f"{USERS_PATH}/carol")
    config = json.loads(data)["config"]
    assert sorted(config) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    sha256, sha512 = users.get("carol", mechanism="SCRAM-SHA-256"), users.get("carol")
    assert (sha256.mechanism, sha512.mechanism) == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert sha256.salt != sha512.salt and len(sha256.stored_key) == 32 and len(sha512.stored_key) == 64
    assert sha256.iterations == sha512.iterations == 8192
    assert verify_password(sha256, "s3cret") and verify_password(sha512, "s3cret")
    users.delete("carol")
    assert users.names() == []
    with pytest.raises(UnknownUserError):
        users.get("carol", mechanism="SCRAM-SHA-256")
