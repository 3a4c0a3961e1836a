"""GroupCommitter: concurrent produce requests to one partition share Delta commits.

Real PartitionLog on a real Delta table in tmp_path; the asyncio loop is run with asyncio.run (no
pytest asyncio plugin).
"""

from __future__ import annotations

import asyncio
import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import LogClosedError
from lakelog.log_tables.group_commit import GroupCommitter
from lakelog.log_tables.partition_log import AppendInfo, PartitionLog
from lakelog.protocol.producer_headers import ProducerBatch

#: these tests are about the Delta table itself: every append is a Delta commit (no segment tail)
SYNC_LAKE = TopicConfig.parse({"lake.commit.interval.ms": "0"})


def open_log(tmp_path) -> PartitionLog:
    return PartitionLog.open(topic="orders", partition=0, table_uri=tmp_path / "orders-0", config=SYNC_LAKE)


def request(req: int, n: int) -> pa.Table:
    """A produce request: n records whose value names the request and the record's place in it."""
    return pa.table({
        "key": pa.array([f"r{req:05d}".encode()] * n, pa.binary()),
        "value": pa.array([f"{req:05d}:{i:05d}".encode() for i in range(n)], pa.binary()),
    })


def test_concurrent_appends_share_commits_with_dense_disjoint_offsets(tmp_path):
    log = open_log(tmp_path)
    rng = random.Random(7)
    sizes = [rng.randint(1, 20) for _ in range(300)]
    appends: list[AppendInfo] = []

    async def main():
        committer = GroupCommitter(log, linger_ms=5, on_append=appends.append)

        async def one(req: int) -> int:
            await asyncio.sleep(rng.random() * 0.2)  # arrivals spread over ~200 ms
            return await committer.append(request(req, sizes[req]))

        bases = await asyncio.gather(*(one(i) for i in range(len(sizes))))
        await committer.close()
        return committer, bases

    committer, bases = asyncio.run(main())
    total = sum(sizes)

    # fewer commits than requests; every record committed once
    assert committer.commits < len(sizes), committer.commits
    assert committer.commits == len(appends) == log.version  # version 0 created the table
    assert committer.records == total == log.log_end_offset
    assert sum(a.count for a in appends) == total
    # commits are back to back
    assert [a.base_offset for a in appends] == [0] + [a.last_offset + 1 for a in appends[:-1]]

    # each request's offsets [base, base + n) are dense, and the requests' ranges tile 0..total-1
    ranges = sorted((b, b + n, req) for req, (b, n) in enumerate(zip(bases, sizes)))
    covered = 0
    for lo, hi, _ in ranges:
        assert lo == covered, "ranges overlap or leave a gap"
        covered = hi
    assert covered == total
    # a request's records are never split across commits
    for lo, hi, req in ranges:
        assert any(a.base_offset <= lo and hi - 1 <= a.last_offset for a in appends), req

    # the table holds every record exactly once, at the offset its request was told
    table = DeltaTable(log.table_uri).to_pyarrow_table().sort_by("offset")
    assert table["offset"].to_pylist() == list(range(total))
    values = table["value"].to_pylist()
    keys = table["key"].to_pylist()
    for req, (base, n) in enumerate(zip(bases, sizes)):
        assert values[base:base + n] == [f"{req:05d}:{i:05d}".encode() for i in range(n)]
        assert keys[base:base + n] == [f"r{req:05d}".encode()] * n
    assert len(set(values)) == total


def test_requests_arriving_together_go_into_one_commit(tmp_path):
    log = open_log(tmp_path)

    async def main():
        committer = GroupCommitter(log, linger_ms=50)
        bases = await asyncio.gather(*(committer.append(request(i, 3)) for i in range(40)))
        await committer.close()
        return committer, bases

    committer, bases = asyncio.run(main())
    assert committer.commits == 1
    assert sorted(bases) == list(range(0, 120, 3))
    assert log.log_end_offset == 120


def test_batch_size_bounds_a_commit(tmp_path):
    log = open_log(tmp_path)
    one = request(0, 10).nbytes  # every request(i, 10) has the same size
    assert request(11, 10).nbytes == one
    appends: list[AppendInfo] = []

    async def main():
        # at most 3 requests fit in batch.size; a linger of a day is cut short once it is reached: 12
        # requests are 4 full batches, so the appends can only finish by batch.size ending each linger
        committer = GroupCommitter(log, linger_ms=24 * 3600 * 1000, batch_size=3 * one, on_append=appends.append)
        try:
            bases = await asyncio.wait_for(
                asyncio.gather(*(committer.append(request(i, 10)) for i in range(12))), 120)
        except asyncio.TimeoutError:
            raise AssertionError("batch.size reached must end the linger") from None
        await committer.close()
        return committer, bases

    committer, bases = asyncio.run(main())
    assert all(a.count <= 30 for a in appends), [a.count for a in appends]
    assert committer.commits >= 4
    assert sorted(bases) == list(range(0, 120, 10))


def test_close_commits_what_is_queued_then_refuses_appends(tmp_path):
    log = open_log(tmp_path)

    async def main():
        committer = GroupCommitter(log, linger_ms=200)
        pending = [asyncio.ensure_future(committer.append(request(i, 2))) for i in range(5)]
        await asyncio.sleep(0)  # queued, lingering
        await committer.close()
        bases = [await p for p in pending]
        with pytest.raises(LogClosedError):
            await committer.append(request(9, 1))
        return bases

    bases = asyncio.run(main())
    assert sorted(bases) == [0, 2, 4, 6, 8]
    assert log.log_end_offset == 10
    assert DeltaTable(log.table_uri).to_pyarrow_table().num_rows == 10


def test_a_failed_commit_fails_its_requests_and_the_next_ones_proceed(tmp_path):
    log = open_log(tmp_path)

    async def main():
        committer = GroupCommitter(log, linger_ms=20)
        good = await committer.append(request(0, 2))
        # a request the log refuses when it builds the batch (an unknown column): its commit fails
        bad = pa.table({"key": pa.array([b"k"]), "bogus": pa.array([1])})
        with pytest.raises(ValueError):
            await committer.append(bad)
        after = await committer.append(request(1, 3))
        await committer.close()
        return good, after, committer

    good, after, committer = asyncio.run(main())
    assert (good, after) == (0, 2)
    assert log.log_end_offset == 5
    assert committer.records == 5
    assert DeltaTable(log.table_uri).to_pyarrow_table().sort_by("offset")["offset"].to_pylist() == list(range(5))


def test_a_commit_mixing_idempotent_and_plain_requests_stores_each_requests_producer_columns(tmp_path):
    """One group commit of three requests (idempotent, plain, idempotent): the plain one's rows have null
    producer columns, the others their request's producer id, epoch and sequence on every row."""
    log = open_log(tmp_path)

    async def main():
        committer = GroupCommitter(log, linger_ms=50)
        bases = await asyncio.gather(committer.append(request(0, 3), producer=ProducerBatch(7, 1, 5)),
                                     committer.append(request(1, 2)),
                                     committer.append(request(2, 1), producer=ProducerBatch(9, 0, 0)))
        await committer.close()
        return committer, bases

    committer, bases = asyncio.run(main())
    assert committer.commits == 1 and bases == [0, 3, 5]
    rows = log.read(0, end_offset=6, columns=["offset", "producer_id", "producer_epoch", "sequence"])
    assert rows["producer_id"].to_pylist() == [7, 7, 7, None, None, 9]
    assert rows["producer_epoch"].to_pylist() == [1, 1, 1, None, None, 0]
    assert rows["sequence"].to_pylist() == [5, 5, 5, None, None, 0]
    log.close()
