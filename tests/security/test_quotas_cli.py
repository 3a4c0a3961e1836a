"""``lakelog quotas alter|describe`` and the client quota routes against a real broker."""

from __future__ import annotations

import subprocess
import sys

import httpx

from lakelog.security.quotas.store import QuotaStore


def lakelog(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60, check=check)


def test_quotas_alter_and_describe(broker, zk_client):
    b = ["--bootstrap-server", broker.url]
    out = lakelog("quotas", "alter", "--user", "alice", "--producer-byte-rate", "1048576", "--consumer-byte-rate",
                  "2097152", *b).stdout.decode()
    assert "Quotas of user=alice: consumer_byte_rate=2097152, producer_byte_rate=1048576" in out
    lakelog("quotas", "alter", "--user", "alice", "--client-id", "etl", "--request-percentage", "25.5", *b)
    lakelog("quotas", "alter", "--client-id", "<default>", "--producer-byte-rate", "10485760", *b)
    described = lakelog("quotas", "describe", *b).stdout.decode().splitlines()
    assert described == [
        "Quota configs for user=alice are consumer_byte_rate=2097152, producer_byte_rate=1048576",
        "Quota configs for user=alice, client-id=etl are request_percentage=25.5",
        "Quota configs for client-id=<default> are producer_byte_rate=10485760",
    ]
    assert lakelog("quotas", "describe", "--client-id", "etl", *b).stdout.decode().splitlines() == [described[1]]
    out = lakelog("quotas", "alter", "--user", "alice", "--delete-config", "producer_byte_rate", *b).stdout.decode()
    assert "Quotas of user=alice: consumer_byte_rate=2097152" in out
    assert QuotaStore(zk_client).describe(user="alice", strict=True)[0][1] == {"consumer_byte_rate": 2097152}

    bad = lakelog("quotas", "alter", "--user", "alice", "--producer-byte-rate", "0", *b, check=False)
    assert bad.returncode == 1 and "producer_byte_rate=0.0: give a number > 0" in bad.stderr.decode()
    none = lakelog("quotas", "alter", "--producer-byte-rate", "5", *b, check=False)
    assert none.returncode == 1 and "name the entity" in none.stderr.decode()

    # the REST route: all entries are checked before any is written
    r = httpx.post(f"{broker.url}/lakelog/v1/client-quotas:alter", json={"entries": [
        {"entity": {"user": "bob"}, "ops": [{"key": "producer_byte_rate", "value": 100}]},
        {"entity": {"group": "x"}, "ops": [{"key": "producer_byte_rate", "value": 100}]}]})
    assert r.status_code == 400 and r.json()["error_code"] == 40023
    assert httpx.get(f"{broker.url}/lakelog/v1/client-quotas", params={"user": "bob"}).json() == {"entries": []}
    r = httpx.post(f"{broker.url}/lakelog/v1/client-quotas:alter", json={"validate_only": True, "entries": [
        {"entity": {"user": None}, "ops": [{"key": "request_percentage", "value": 200}]}]})
    assert r.status_code == 200 and r.json()["entries"] == [{"entity": {"user": None}, "values": {"request_percentage": 200.0}}]
    assert httpx.get(f"{broker.url}/lakelog/v1/client-quotas", params={"user": "<default>"}).json() == {"entries": []}
