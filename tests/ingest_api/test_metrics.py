"""``GET /metrics``, ``/health`` and ``/ready`` against a real broker process: the values scraped match what
the test did (records produced and fetched, requests failed, a group's committed offsets and lag)."""

from __future__ import annotations

import base64
import json
import re
import uuid
from pathlib import Path

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from lakelog.ingest_api import codecs
from tests.harness import wait_for


def _scrape(http: httpx.Client) -> dict[str, list]:
    """``{sample name: [(labels, value), ...]}`` of one scrape."""
    resp = http.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain; version=")
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def _value(samples: dict[str, list], name: str, **labels) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``; None when there is none."""
    found = [v for got, v in samples.get(name, []) if all(got.get(k) == str(w) for k, w in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def _produce(http: httpx.Client, topic: str, partition: int, count: int) -> None:
    body = orjson.dumps({"records": [{"value": base64.b64encode(b"v" * 100).decode()} for _ in range(count)]})
    resp = http.post(f"/topics/{topic}/partitions/{partition}", content=body,
                     headers={"Content-Type": codecs.BINARY_V2})
    assert resp.status_code == 200, resp.text


def test_traffic_offsets_requests_and_lag_match_what_happened(api, http):
    topic, group = f"m-{uuid.uuid4().hex[:10]}", f"g-{uuid.uuid4().hex[:8]}"
    api.create_topic(topic, partitions=2)
    before = _scrape(http)
    assert _value(before, "lakelog_messages_in_total", topic=topic) in (None, 0)

    _produce(http, topic, 0, 7)
    _produce(http, topic, 0, 3)
    _produce(http, topic, 1, 5)
    fetched = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                       headers={"Accept": codecs.BINARY_V2})
    assert fetched.status_code == 200 and len(fetched.json()) == 10
    out_of_range = http.get(f"/topics/{topic}/partitions/1/records", params={"offset": 99, "max_wait_ms": 0},
                            headers={"Accept": codecs.BINARY_V2})
    assert out_of_range.status_code >= 400
    assert http.post(f"/consumers/{group}/offsets", json={"offsets": [
        {"topic": topic, "partition": 0, "offset": 4}, {"topic": topic, "partition": 1, "offset": 5}]}).status_code == 200

    s = _scrape(http)
    # Kafka's BrokerTopicMetrics
    assert _value(s, "lakelog_messages_in_total", topic=topic) == 15
    assert _value(s, "lakelog_bytes_in_total", topic=topic) >= 15 * 100
    assert _value(s, "lakelog_produce_requests_total", topic=topic) == 3
    assert _value(s, "lakelog_failed_produce_requests_total", topic=topic) == 0
    assert _value(s, "lakelog_fetch_requests_total", topic=topic) == 2
    # an offset out of range is an expected answer, not a failure (Kafka's FailedFetchRequestsPerSec)
    assert _value(s, "lakelog_failed_fetch_requests_total", topic=topic) == 0
    assert _value(s, "lakelog_bytes_out_total", topic=topic) >= 10 * 100
    # per partition, from the log itself
    assert _value(s, "lakelog_partition_log_end_offset", topic=topic, partition=0) == 10
    assert _value(s, "lakelog_partition_high_watermark", topic=topic, partition=1) == 5
    assert _value(s, "lakelog_partition_last_stable_offset", topic=topic, partition=1) == 5
    assert _value(s, "lakelog_partition_log_start_offset", topic=topic, partition=0) == 0
    lake_end = _value(s, "lakelog_partition_lake_end_offset", topic=topic, partition=0)
    assert _value(s, "lakelog_partition_lake_lag_records", topic=topic, partition=0) == 10 - lake_end
    assert _value(s, "lakelog_partition_log_size_bytes", topic=topic, partition=0) > 1000
    # the broker: one broker leads everything, nothing under-replicated, it is the controller
    assert _value(s, "lakelog_active_controller") == 1
    assert _value(s, "lakelog_under_replicated_partitions") == 0
    assert _value(s, "lakelog_offline_partitions") == 0
    assert _value(s, "lakelog_leader_partitions") == _value(s, "lakelog_partitions") >= 2
    # consumer group lag (kafka-lag-exporter's families): high watermark minus committed
    assert _value(s, "lakelog_consumergroup_group_lag", group=group, topic=topic, partition=0) == 6
    assert _value(s, "lakelog_consumergroup_group_lag", group=group, topic=topic, partition=1) == 0
    assert _value(s, "lakelog_consumergroup_group_offset", group=group, topic=topic, partition=0) == 4
    assert _value(s, "lakelog_consumergroup_group_sum_lag", group=group) == 6
    # the log histograms: one observation per group commit, at least our three
    appends = _value(s, "lakelog_log_append_seconds_count") - (_value(before, "lakelog_log_append_seconds_count") or 0)
    assert appends >= 3
    assert _value(s, "lakelog_group_commit_records_sum") - (_value(before, "lakelog_group_commit_records_sum") or 0) >= 15
    # the request metrics, by route template
    route = "/topics/{topic}/partitions/{partition}"
    produced = _value(s, "lakelog_http_requests_total", method="POST", route=route, status="2xx")
    assert produced is not None and produced >= 3, s.get("lakelog_http_requests_total")
    assert _value(s, "lakelog_http_request_duration_seconds_count", method="POST", route=route) >= 3


def test_a_method_no_route_has_is_labelled_other(http):
    assert http.request("PROPFIND", "/health").status_code == 405
    s = _scrape(http)
    assert _value(s, "lakelog_http_requests_total", method="other", route="/health", status="4xx") >= 1
    assert _value(s, "lakelog_http_requests_total", method="PROPFIND", route="/health", status="4xx") is None


def test_health_and_ready(http, gw):
    health = http.get("/health")
    assert health.status_code == 200 and health.json() == {"status": "ok", "broker_id": 0}
    ready = http.get("/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "broker_id": 0}


def test_an_unknown_topic_gets_no_counters(http):
    name = f"nope-{uuid.uuid4().hex[:8]}"
    resp = http.get(f"/topics/{name}/partitions/0/records", params={"offset": 0, "max_wait_ms": 0},
                    headers={"Accept": codecs.BINARY_V2})
    assert resp.status_code == 404
    assert _value(_scrape(http), "lakelog_fetch_requests_total", topic=name) is None


def test_the_grafana_dashboard_queries_only_exported_metrics(http):
    """``conf/grafana/lakelog.json`` names metrics the broker exports (after some traffic, every family
    has samples or is at least declared)."""
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "conf" / "grafana" / "lakelog.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\blakelog_[a-z_]+", target["expr"])}
    assert len(queried) >= 20
    exported = set(re.findall(r"^# TYPE (lakelog_[a-z_]+) (\w+)", http.get("/metrics").text, flags=re.M))
    names = set()
    for family, kind in exported:
        names |= {family} | ({f"{family}_total"} if kind == "counter" else set()) | (
            {f"{family}_bucket", f"{family}_count", f"{family}_sum"} if kind == "histogram" else set())
    assert queried <= names, sorted(queried - names)


def test_a_deleted_topic_leaves_the_metrics(api, http):
    topic = f"gone-{uuid.uuid4().hex[:8]}"
    api.create_topic(topic, partitions=1)
    _produce(http, topic, 0, 2)
    assert _value(_scrape(http), "lakelog_messages_in_total", topic=topic) == 2
    api.admin.delete_topic(topic)
    wait_for(lambda: _value(_scrape(http), "lakelog_partition_log_end_offset", topic=topic, partition=0) is None,
             what="the deleted topic's replica to be dropped")
    assert _value(_scrape(http), "lakelog_messages_in_total", topic=topic) is None
