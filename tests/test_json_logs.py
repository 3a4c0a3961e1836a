"""``--log-format json``: a real broker process writes one JSON object per line (time, level, logger, message,
broker id; topic and partition where a line is about a partition)."""

from __future__ import annotations

import json

import httpx

from lakelog.runtime.broker_process import BrokerProcess
from tests.harness import new_chroot, wait_for


def test_a_broker_logs_json_lines_with_its_id_and_the_partition(zookeeper, tmp_path):
    broker = BrokerProcess(zookeeper_connect=new_chroot(zookeeper.connect_string), log_dirs=tmp_path / "logs",
                           broker_id=7, log_level="info", log_format="json", log_file=tmp_path / "broker.log")
    broker.start()
    try:
        cluster = httpx.get(f"{broker.url}/v3/clusters").json()["data"][0]["cluster_id"]
        assert httpx.post(f"{broker.url}/v3/clusters/{cluster}/topics", json={
            "topic_name": "logged", "partitions_count": 1, "replication_factor": 1}).status_code == 201

        def partition_line():
            for line in (tmp_path / "broker.log").read_text().splitlines():
                entry = json.loads(line)
                if entry.get("topic") == "logged":
                    return entry
        entry = wait_for(partition_line, what="a log line about logged-0")
        assert entry["partition"] == 0 and entry["broker_id"] == 7 and "logged-0" in entry["message"]
    finally:
        broker.stop()
    lines = (tmp_path / "broker.log").read_text().splitlines()
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert len(entries) >= 3
    for e in entries:
        assert {"time", "level", "logger", "message", "broker_id"} <= e.keys(), e
        assert e["broker_id"] == 7 and e["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    assert any(e["logger"].startswith("uvicorn") for e in entries)  # uvicorn's own lines are JSON too
    assert any(e["logger"] == "lakelog.broker" and "started" in e["message"] for e in entries)
