"""v3 ACL routes (Confluent's shapes), the users routes, and `lakelog acls`/`lakelog users` against a real broker."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from lakelog.protocol.errors import RemoteError


def lakelog(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60, check=check)


def test_create_list_delete_in_confluents_shapes(broker, client):
    base = f"{broker.url}/v3/clusters/{client.cluster_id}/acls"
    read = {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
            "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}
    r = httpx.post(base, json=read)
    assert r.status_code == 201 and r.content == b""
    r = httpx.post(f"{base}:batch", json={"data": [
        {"resource_type": "Topic", "resource_name": "team-", "pattern_type": "Prefixed", "principal": "User:bob",
         "operation": "Write"},  # Kafka's spelling; host * and ALLOW by default
        {"resource_type": "CLUSTER", "resource_name": "kafka-cluster", "principal": "User:broker",
         "operation": "CLUSTER_ACTION"}]})
    assert r.status_code == 204

    listed = httpx.get(base).json()
    assert listed["kind"] == "KafkaAclList" and listed["metadata"]["self"] == base
    assert listed["data"][0] == {"kind": "KafkaAcl", "metadata": {"self": base, "resource_name": None},
                                 "cluster_id": client.cluster_id, "resource_type": "CLUSTER",
                                 "resource_name": "kafka-cluster", "pattern_type": "LITERAL",
                                 "principal": "User:broker", "host": "*", "operation": "CLUSTER_ACTION",
                                 "permission": "ALLOW"}
    assert len(listed["data"]) == 3
    # MATCH: what applies to a name (the literal name and the prefixes)
    assert [a["principal"] for a in client.security.list_acls(resource_type="TOPIC", resource_name="team-a",
                                                     pattern_type="MATCH")] == ["User:bob"]
    assert client.security.list_acls(principal="User:alice") == [read]
    assert client.security.list_acls(resource_type="GROUP") == []

    removed = client.security.delete_acls(resource_type="TOPIC", principal="User:bob")
    assert [(a["resource_name"], a["pattern_type"]) for a in removed] == [("team-", "PREFIXED")]
    assert {a["principal"] for a in client.security.list_acls()} == {"User:alice", "User:broker"}
    r = httpx.delete(base)  # resource_type is required (ANY for all)
    assert (r.status_code, r.json()["error_code"]) == (400, 40001) and "resource_type" in r.text
    assert len(client.security.delete_acls(resource_type="ANY")) == 2 and client.security.list_acls() == []


def test_invalid_acls_are_refused_and_nothing_is_stored(broker, client):
    base = f"{broker.url}/v3/clusters/{client.cluster_id}/acls"
    good = {"resource_type": "TOPIC", "resource_name": "t", "principal": "User:a", "operation": "READ"}
    bad = {"resource_type": "GROUP", "resource_name": "g", "principal": "User:a", "operation": "WRITE"}
    r = httpx.post(f"{base}:batch", json={"data": [good, bad]})
    assert r.status_code == 400 and r.json()["error_code"] == 40021
    assert "Operation Write does not apply to a Group" in r.json()["message"]
    assert client.security.list_acls() == []  # all or none
    r = httpx.post(base, json={**good, "principal": "alice"})
    assert (r.status_code, r.json()["error_code"]) == (400, 40021) and "use Type:name" in r.json()["message"]
    r = httpx.get(base, params={"operation": "FLY"})
    assert (r.status_code, r.json()["error_code"]) == (400, 40021)
    r = httpx.get(f"{broker.url}/v3/clusters/not-this-one/acls")
    assert (r.status_code, r.json()["error_code"]) == (404, 40409)
    with pytest.raises(RemoteError) as e:
        client.security.create_acls([bad])
    assert e.value.error_code == 40021


def test_cli_adds_lists_and_removes_like_kafka_acls(broker, client):
    b = ["--bootstrap-server", broker.url]
    out = lakelog("acls", "add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                  "--operation", "Read", "--operation", "Describe", "--topic", "orders", *b).stdout.decode()
    assert "Added 4 ACLs" in out
    lakelog("acls", "add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "Read",
            "--topic", "ord", "--resource-pattern-type", "prefixed", *b)
    assert len(client.security.list_acls()) == 5
    listed = lakelog("acls", "list", "--topic", "orders", "--resource-pattern-type", "match", *b).stdout.decode()
    assert "User:mallory" in listed and "10.0.0.9" in listed and listed.count("User:alice") == 2

    out = lakelog("acls", "remove", "--allow-principal", "User:bob", "--topic", "orders", "--force", *b).stdout.decode()
    assert "Removed 0 ACLs" in out  # as kafka-acls.sh: --operation defaults to All, and bob has no All ACL
    out = lakelog("acls", "remove", "--allow-principal", "User:bob", "--operation", "Read", "--operation", "Describe",
                  "--topic", "orders", "--force", *b).stdout.decode()
    assert "Removed 2 ACLs" in out and {a["principal"] for a in client.security.list_acls()} == {"User:alice", "User:mallory"}
    out = lakelog("acls", "remove", "--topic", "orders", "--force", *b).stdout.decode()  # all of the resource's
    assert "Removed 2 ACLs" in out and [a["principal"] for a in client.security.list_acls()] == ["User:mallory"]

    wrong = lakelog("acls", "add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g", *b,
                    check=False)
    assert wrong.returncode == 1 and "does not apply to a Group" in wrong.stderr.decode()
    missing = lakelog("acls", "add", "--operation", "Read", "--topic", "t", *b, check=False)
    assert missing.returncode == 1 and "name a principal" in missing.stderr.decode()


def test_users_routes_and_cli(broker, client):
    b = ["--bootstrap-server", broker.url]
    out = subprocess.run([sys.executable, "-m", "lakelog.cli", "users", "add", "alice", "--password-stdin", *b],
                         input=b"s3cret\n", capture_output=True, timeout=60, check=True).stdout.decode()
    assert "Set the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of User:alice" in out
    client.security.upsert_user("bob", "pw", iterations=8192)
    assert client.security.list_users() == ["alice", "bob"]
    assert lakelog("users", "list", *b).stdout.decode().split() == ["alice", "bob"]
    r = httpx.put(f"{broker.url}/lakelog/v1/users/carol", json={"password": "pw", "iterations": 10})
    assert (r.status_code, r.json()["error_code"]) == (422, 42222) and "iterations" in r.text  # a body field
    lakelog("users", "delete", "alice", *b)
    assert client.security.list_users() == ["bob"]
    gone = lakelog("users", "delete", "alice", *b, check=False)
    assert gone.returncode == 1 and "No user 'alice'" in gone.stderr.decode()
    no_stdin = lakelog("users", "add", "dave", *b, check=False)
    assert no_stdin.returncode == 1 and "--password-stdin" in no_stdin.stderr.decode()
