"""The last stable offset and ``isolation_level`` over HTTP (issue 15, point 4), on a real in-process broker
and ZooKeeper, its gateway served by uvicorn: an open transaction holds the LSO that GET offsets and the
partition views show; read_committed fetches and consumer instances see neither open nor aborted records,
read_uncommitted ones see both but never markers; positions and committed offsets move past a trailing
commit marker (lag 0).

Transactions are written straight into the partition log (``tests.transactions_inprocess``)."""

from __future__ import annotations

import base64

import pytest

from lakelog.client import LakelogClient
from tests.transactions_inprocess import ServedBroker

OPEN, ABORTED, COMMITTED = 11, 12, 13  # producer ids


@pytest.fixture
def served(zk_connect, tmp_path):
    with ServedBroker(zk_connect, tmp_path / "logs") as served:
        yield served


@pytest.fixture
def client(served):
    with LakelogClient(served.url) as client:
        yield client


def _layout(served: ServedBroker, client: LakelogClient, topic: str) -> None:
    """Offsets 0-1 plain, 2-3 an open transaction, 4 aborted (marker 5), 6 committed (marker 7)."""
    client.create_topic(topic, partitions=1)
    client.produce_binary(topic, [(None, b"p0"), (None, b"p1")], partition=0)
    assert served.append_transactional(topic, 0, [b"o0", b"o1"], producer_id=OPEN) == 2
    served.append_transactional(topic, 0, [b"x0"], producer_id=ABORTED)
    assert served.end_transaction(topic, 0, producer_id=ABORTED, commit=False) == 5
    served.append_transactional(topic, 0, [b"c0"], producer_id=COMMITTED)
    assert served.end_transaction(topic, 0, producer_id=COMMITTED, commit=True) == 7


def _values(page) -> list[bytes]:
    if isinstance(page.records, list):
        return [base64.b64decode(r["value"]) for r in page.records]
    return page.records["value"].to_pylist()


def test_an_open_transaction_holds_the_lso_and_fetch_reads_by_isolation_level(served, client):
    _layout(served, client, "iso")
    assert client.partition_offsets("iso", 0) == {"beginning_offset": 0, "end_offset": 8, "last_stable_offset": 2}
    assert client.admin.describe_topic("iso")["partitions"][0]["last_stable_offset"] == 2

    committed = client.fetch_page("iso", 0, 0, isolation_level="read_committed")
    assert (_values(committed), committed.next_offset) == ([b"p0", b"p1"], 2)
    held = client.fetch_page("iso", 0, 2, form="arrow", isolation_level="read_committed")
    assert (held.records.num_rows, held.next_offset) == (0, 2)  # nothing at or past the LSO
    uncommitted = client.fetch_page("iso", 0, 0, form="arrow")  # the default: read_uncommitted
    assert _values(uncommitted) == [b"p0", b"p1", b"o0", b"o1", b"x0", b"c0"]
    assert uncommitted.next_offset == 8  # past the commit marker at 7
    bad = client.http.get("/topics/iso/partitions/0/records", params={"isolation_level": "serializable"})
    assert bad.status_code == 400 and bad.json()["error_code"] == 40001 and "isolation_level" in bad.json()["message"]

    served.end_transaction("iso", 0, producer_id=OPEN, commit=True)  # marker 8: the LSO reaches the HW
    assert client.partition_offsets("iso", 0)["last_stable_offset"] == 9
    after = client.fetch_page("iso", 0, 0, isolation_level="read_committed")
    assert _values(after) == [b"p0", b"p1", b"o0", b"o1", b"c0"] and after.next_offset == 9
    assert client.fetch_page("iso", 0, 8, isolation_level="read_committed").next_offset == 9


def test_consumer_instances_read_by_isolation_level_and_commit_past_the_markers(served, client):
    _layout(served, client, "iso-c")
    bad = client.http.post("/consumers/g-bad", json={"isolation.level": "serializable"},
                           headers={"Content-Type": "application/vnd.kafka.v2+json"})
    assert bad.status_code == 422 and bad.json()["error_code"] == 42222 and "isolation.level" in bad.text
    polled: dict[str, list[bytes]] = {"read_committed": [], "read_uncommitted": []}
    consumers = {}
    for level in polled:
        consumers[level] = c = client.groups.create_consumer(f"g-{level}", auto_offset_reset="earliest", auto_commit=False,
                                                      isolation_level=level)
        c.assign([("iso-c", 0)])

    def poll(level: str) -> None:
        polled[level] += [base64.b64decode(r["value"]) for r in consumers[level].poll(timeout_ms=300)]

    for level in polled:
        poll(level)
    assert polled == {"read_committed": [b"p0", b"p1"],
                      "read_uncommitted": [b"p0", b"p1", b"o0", b"o1", b"x0", b"c0"]}
    served.end_transaction("iso-c", 0, producer_id=OPEN, commit=True)  # trailing marker at 8
    for level, consumer in consumers.items():
        poll(level)
        consumer.commit()  # every record fetched: the position
        assert consumer.committed([("iso-c", 0)])[0]["offset"] == 9, level
        assert client.groups.group_lag(f"g-{level}")["total_lag"] == 0, level
        consumer.close()
    assert polled["read_committed"] == [b"p0", b"p1", b"o0", b"o1", b"c0"]
    assert polled["read_uncommitted"] == [b"p0", b"p1", b"o0", b"o1", b"x0", b"c0"]
