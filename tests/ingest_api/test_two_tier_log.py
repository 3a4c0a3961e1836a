"""The two-tier log seen from a client: acknowledged from the segment tail, in Delta within
``lake.commit.interval.ms``, the lake end offset reported beside LEO and HW, a clean stop flushes."""

from __future__ import annotations

import httpx
from deltalake import DeltaTable

from lakelog.client import LakelogClient
from lakelog.log_tables.segments import SEGMENT_DIR
from tests.harness import read_partition, wait_for

JSON_V2 = {"Content-Type": "application/vnd.kafka.json.v2+json"}


def produce(http: httpx.Client, topic: str, n: int) -> None:
    for i in range(n):
        resp = http.post(f"/topics/{topic}/partitions/0", json={"records": [{"value": i}]}, headers=JSON_V2)
        assert resp.status_code == 200, resp.text


def delta_offsets(table_dir) -> list[int]:
    return sorted(DeltaTable(str(table_dir)).to_pyarrow_table(columns=["offset"])["offset"].to_pylist())


def test_records_are_served_before_the_flush_and_a_clean_stop_flushes_them(broker_factory, tmp_path):
    broker = broker_factory()
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("slow-lake", partitions=1, configs={"lake.commit.interval.ms": "3600000"})
        produce(http, "slow-lake", 7)
        info = http.get("/topics/slow-lake/partitions/0").json()
        assert (info["lake_end_offset"], info["log_end_offset"], info["high_watermark"]) == (0, 7, 7)
        logs = http.get("/lakelog/v1/topics/slow-lake/logs").json()
        assert logs[0]["lake_end_offset"] == 0 and logs[0]["high_watermark"] == 7
        assert [r["offset"] for r in read_partition(http, "slow-lake", 0)] == list(range(7))
    table_dir = tmp_path / "logs-0" / "slow-lake-0"
    assert delta_offsets(table_dir) == [] and any((table_dir / SEGMENT_DIR).iterdir())
    broker.stop()  # a clean stop commits the tail to Delta
    assert delta_offsets(table_dir) == list(range(7))
    broker = broker_factory()
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        wait_for(lambda: http.get("/topics/slow-lake/partitions/0").json().get("high_watermark") == 7,
                 what="the partition is served again")
        info = http.get("/topics/slow-lake/partitions/0").json()
        assert (info["lake_end_offset"], info["log_end_offset"]) == (7, 7)
        produce(http, "slow-lake", 1)
        assert [r["offset"] for r in read_partition(http, "slow-lake", 0)] == list(range(8))


def test_the_flusher_commits_within_the_interval(broker, tmp_path):
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("quick-lake", partitions=1, configs={"lake.commit.interval.ms": "200"})
        produce(http, "quick-lake", 5)
        wait_for(lambda: http.get("/topics/quick-lake/partitions/0").json()["lake_end_offset"] == 5,
                 what="the lake end offset reaches the high watermark")
        assert delta_offsets(tmp_path / "logs-0" / "quick-lake-0") == list(range(5))


def test_lake_commit_interval_zero_commits_every_append(broker, tmp_path):
    with LakelogClient(broker.url) as api, httpx.Client(base_url=broker.url, timeout=30) as http:
        api.create_topic("sync-lake", partitions=1, configs={"lake.commit.interval.ms": "0"})
        produce(http, "sync-lake", 3)
        info = http.get("/topics/sync-lake/partitions/0").json()
        assert info["lake_end_offset"] == info["high_watermark"] == 3
        assert delta_offsets(tmp_path / "logs-0" / "sync-lake-0") == [0, 1, 2]
