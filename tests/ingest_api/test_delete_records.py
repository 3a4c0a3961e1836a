"""DeleteRecords for users on a real broker: ``POST /v3/clusters/{c}/topics/{t}/records:delete``, the client's
``admin.delete_records`` and ``lakelog records delete --offset-json-file`` (kafka-delete-records): the log
start offset moves, the Delta table's files wholly below it leave the table, and a bad request moves
nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakelog.errors import (InvalidBodyFieldError, InvalidTopicError, OffsetOutOfRangeError,
                            PolicyViolationError, UnknownPartitionError, UnknownTopicError)
from tests.harness import table_offsets


def _delete_url(api, topic: str) -> str:
    return f"/v3/clusters/{api.cluster_id}/topics/{topic}/records:delete"


def _topic_in_files(api, topic: str, *, partitions: int = 1, files: int = 3, per_file: int = 10) -> None:
    """``topic`` with ``lake.commit.interval.ms=0`` (a Delta commit per append): ``files`` data files of
    ``per_file`` records in each partition."""
    api.create_topic(topic, partitions=partitions, configs={"lake.commit.interval.ms": "0"})
    for p in range(partitions):
        for f in range(files):
            api.produce_binary(topic, [(None, f"{p}-{f}-{i}".encode()) for i in range(per_file)], partition=p)


def _log_start(api, topic: str, partition: int = 0) -> int:
    return api.admin.partition_offsets(topic, partition)["beginning_offset"]


def test_delete_records_moves_the_log_start_and_removes_the_table_files_below_it(api, http, topic_name):
    _topic_in_files(api, topic_name)
    uri = api.admin.topic_logs(topic_name)[0]["table_uri"]
    assert table_offsets(uri) == list(range(30))

    resp = http.post(_delete_url(api, topic_name), json={"partitions": [{"partition_id": 0, "offset": 15}]})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"cluster_id": api.cluster_id, "topic_name": topic_name,
                           "partitions": [{"partition_id": 0, "low_watermark": 15}]}
    assert _log_start(api, topic_name) == 15
    assert table_offsets(uri) == list(range(10, 30))  # the file 0-9 left the table; 10-19 holds offset 15
    fetched = http.get(f"/topics/{topic_name}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0})
    assert fetched.status_code == 422 and fetched.json()["error_code"] == OffsetOutOfRangeError.error_code
    records = http.get(f"/topics/{topic_name}/partitions/0/records", params={"offset": 15, "max_wait_ms": 0}).json()
    assert [r["offset"] for r in records] == list(range(15, 30))

    # an offset below the log start moves nothing; -1 is the high watermark: every file leaves the table
    assert api.admin.delete_records({(topic_name, 0): 3}) == {(topic_name, 0): 15}
    assert api.admin.delete_records({(topic_name, 0): -1}) == {(topic_name, 0): 30}
    assert table_offsets(uri) == [] and _log_start(api, topic_name) == 30
    api.produce_binary(topic_name, [(None, b"after")], partition=0)
    records = http.get(f"/topics/{topic_name}/partitions/0/records", params={"offset": 30, "max_wait_ms": 0}).json()
    assert [r["offset"] for r in records] == [30]


@pytest.mark.parametrize("partitions, error", [
    ([{"partition_id": 0, "offset": 5}, {"partition_id": 1, "offset": 31}], OffsetOutOfRangeError),  # above the HW
    ([{"partition_id": 0, "offset": 5}, {"partition_id": 0, "offset": 6}], InvalidBodyFieldError),   # named twice
    ([{"partition_id": 0, "offset": 5}, {"partition_id": 7, "offset": 1}], UnknownPartitionError),
    ([{"partition_id": 0, "offset": -2}], InvalidBodyFieldError),                                    # -1 or more
    ([{"partition_id": 0, "offset": True}], InvalidBodyFieldError),                                  # not an int
    ([], InvalidBodyFieldError),
])
def test_a_bad_delete_records_request_moves_nothing(api, http, topic_name, partitions, error):
    _topic_in_files(api, topic_name, partitions=2, files=3)
    resp = http.post(_delete_url(api, topic_name), json={"partitions": partitions})
    assert (resp.status_code, resp.json()["error_code"]) == (error.http_status, error.error_code), resp.text
    assert resp.json()["message"]
    assert [_log_start(api, topic_name, p) for p in (0, 1)] == [0, 0]


def test_delete_records_is_refused_on_compacted_internal_and_unknown_topics(api, http, topic_name):
    api.create_topic(topic_name, configs={"cleanup.policy": "compact"})
    api.produce_binary(topic_name, [(b"k", b"v")], partition=0)
    body = {"partitions": [{"partition_id": 0, "offset": 1}]}
    resp = http.post(_delete_url(api, topic_name), json=body)
    assert (resp.status_code, resp.json()["error_code"]) == (400, PolicyViolationError.error_code), resp.text
    assert "cleanup.policy" in resp.json()["message"] and _log_start(api, topic_name) == 0
    resp = http.post(_delete_url(api, "__consumer_offsets"), json=body)
    assert resp.json()["error_code"] == InvalidTopicError.error_code, resp.text
    resp = http.post(_delete_url(api, f"{topic_name}-none"), json=body)
    assert resp.json()["error_code"] == UnknownTopicError.error_code, resp.text


def test_the_openapi_document_describes_delete_records(http):
    doc = http.get("/openapi.json").json()
    op = doc["paths"]["/v3/clusters/{cluster_id}/topics/{topic}/records:delete"]["post"]
    assert "kafka-delete-records" in op["summary"] + op["description"]
    body = doc["components"]["schemas"]["DeleteRecordsPartition"]["properties"]
    assert body["offset"]["minimum"] == -1 and body["partition_id"]["minimum"] == 0


def _lakelog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, text=True, timeout=120)


def test_records_delete_takes_kafka_delete_records_offsets_json(api, gw, topic_name, tmp_path):
    _topic_in_files(api, topic_name, partitions=2, files=2)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0, "offset": 12},
                                                  {"topic": topic_name, "partition": 1, "offset": -1}],
                                   "version": 1}))
    out = _lakelog("records", "delete", "--offset-json-file", str(offsets), "--bootstrap-server", gw.url)
    assert out.returncode == 0, out.stderr
    assert "Records delete operation completed:" in out.stdout
    assert f"partition: {topic_name}-0\tlow_watermark: 12" in out.stdout
    assert f"partition: {topic_name}-1\tlow_watermark: 20" in out.stdout
    assert [_log_start(api, topic_name, p) for p in (0, 1)] == [12, 20]

    offsets.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0}], "version": 1}))
    out = _lakelog("records", "delete", "--offset-json-file", str(offsets), "--bootstrap-server", gw.url)
    assert out.returncode == 1 and "integer partition and offset" in out.stderr
    offsets.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0, "offset": 99}], "version": 1}))
    out = _lakelog("records", "delete", "--offset-json-file", str(offsets), "--bootstrap-server", gw.url)
    assert out.returncode == 1 and "out of range" in out.stderr
    assert _log_start(api, topic_name, 0) == 12
