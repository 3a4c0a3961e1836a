"""kcat (Debian's ``kcat`` package: librdkafka's command-line producer, consumer and metadata lister)
against a lakelog broker's Kafka listener: keyed records with headers produced (``-P -K: -H``), read
back (``-C -e -f``) and the topic's metadata listed (``-L -J``), all checked against lakelog's own view.

kcat is installed by ``.ci/run``; outside CI the test skips when it is missing."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

import pytest

from lakelog.client import LakelogClient
from tests.harness import read_partition

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def kcat() -> str:
    if KCAT is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed in CI: .ci/run installs Debian's kcat package")
        pytest.skip("needs kcat (Debian's package: apt-get install kcat)")
    return KCAT


def _kcat(kcat: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([kcat, *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kcat {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_kcat_produces_keys_and_headers_consumes_and_lists_metadata(kcat, kafka_broker, topic_name):
    broker, bootstrap = kafka_broker
    with LakelogClient(broker.url) as http:
        http.create_topic(topic_name, partitions=2, replication_factor=1)
    lines = [f"k{i}:value-{i}" for i in range(40)]
    _kcat(kcat, "-b", bootstrap, "-t", topic_name, "-P", "-K:", "-H", "trace=t-1", "-H", "origin=kcat",
          "-X", "acks=all", stdin="\n".join(lines) + "\n")

    stored = {}
    for p in range(2):
        for r in read_partition(broker.url, topic_name, p):
            headers = [(h["key"], base64.b64decode(h["value"]).decode()) for h in r["headers"]]
            stored[(p, r["offset"])] = (base64.b64decode(r["key"]).decode(), base64.b64decode(r["value"]).decode(),
                                        headers)
    assert sorted(f"{k}:{v}" for k, v, _ in stored.values()) == sorted(lines)
    assert all(h == [("trace", "t-1"), ("origin", "kcat")] for _, _, h in stored.values())
    assert {p for p, _ in stored} == {0, 1}  # librdkafka's partitioner spread 40 keys over both

    out = _kcat(kcat, "-b", bootstrap, "-t", topic_name, "-C", "-e", "-o", "beginning",
                "-f", "%p|%o|%k|%s|%h\n")
    consumed = {}
    for line in out.splitlines():
        p, o, k, v, h = line.split("|")
        consumed[(int(p), int(o))] = (k, v, [tuple(x.split("=", 1)) for x in h.split(",")])
    assert consumed == stored

    meta = json.loads(_kcat(kcat, "-b", bootstrap, "-t", topic_name, "-L", "-J"))
    assert [b["id"] for b in meta["brokers"]] == [0]
    assert meta["brokers"][0]["name"] == bootstrap
    (topic,) = meta["topics"]
    assert topic["topic"] == topic_name
    assert sorted((p["partition"], p["leader"], [r["id"] for r in p["replicas"]], [r["id"] for r in p["isrs"]])
                  for p in topic["partitions"]) == [(0, 0, [0], [0]), (1, 0, [0], [0])]
