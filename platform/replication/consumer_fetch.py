"""A consumer's fetch on the partition's leader, with Kafka's ``isolation.level`` (KIP-98).

:func:`read_records` reads records from an offset of a partition this broker leads (the read of
:meth:`ReplicaManager.fetch <lakelog.replication.replica_manager.ReplicaManager.fetch>`): below the
high watermark (``read_uncommitted``, Kafka's default), or below the last stable offset without aborted
records (``read_committed``); transaction markers (control records) reach only a Kafka-wire fetch that asks
for them (as control batches). It long-polls up to
``max_wait_ms`` while there is nothing to read for that isolation level.

:func:`next_offset` says where the consumer goes on: a read that dropped markers or aborted records may
end past its last row (a commit marker ends most transactions); a consumer that went on from the last
row + 1 would read the marker forever and never reach the log end (lag 1).
"""

from __future__ import annotations

import asyncio

import pyarrow as pa

from lakelog.log_tables.fetch import read_end_offset
from lakelog.log_tables.transaction_index import IsolationLevel
from lakelog.replication.partition import Partition

__all__ = ["next_offset", "read_records", "readable_end"]


def next_offset(rows: pa.Table, offset: int) -> int:
    """Where the fetch after ``rows`` (a :meth:`PartitionLog.read
    <lakelog.log_tables.partition_log.PartitionLog.read>` from ``offset``) starts: where the read ended
    (:func:`~lakelog.log_tables.fetch.read_end_offset`, past dropped markers), else the last row's offset
    + 1, else ``offset`` (nothing read)."""
    end = read_end_offset(rows)
    if end is not None:
        return max(end, offset)
    return rows["offset"][-1].as_py() + 1 if rows.num_rows else offset


def readable_end(part: Partition, isolation_level: IsolationLevel) -> int:
    """The exclusive end of what a consumer with ``isolation_level`` may read of ``part``'s log now: the
    high watermark, or (read_committed) the last stable offset (Kafka's ListOffsets latest)."""
    return part.log.last_stable_offset if isolation_level == "read_committed" else part.log.high_watermark


async def read_records(part: Partition, offset: int, *, max_bytes: int, max_wait_ms: int,
                       columns: list[str] | None = None,
                       isolation_level: IsolationLevel = "read_uncommitted", control_records: bool = False) -> pa.Table:
    """Records from ``offset`` of ``part``'s log, waiting up to ``max_wait_ms`` for some: the read of
    :meth:`ReplicaManager.fetch <lakelog.replication.replica_manager.ReplicaManager.fetch>` once it found
    the leader's replica.

    Args:
        part: a partition this broker leads.
        offset: the first offset wanted.
        max_bytes: soft limit on the answer's Arrow bytes (at least one record, KIP-74).
        max_wait_ms: long-poll this long (ms) while the read has nothing (no record and no marker to move
            past) below :func:`readable_end`.
        columns: the log columns wanted (None: all of :data:`~lakelog.log_tables.schema.LOG_SCHEMA`).
        isolation_level: Kafka's ``isolation.level``: ``read_uncommitted`` reads below the high watermark,
            open and aborted transactions included; ``read_committed`` below the last stable offset, no
            aborted records.
        control_records: keep the transaction markers (Kafka's wire answers them as control batches, which
            move a consumer past them); False (HTTP consumers): dropped, the next fetch starts past them.

    Returns:
        the rows read; where the next fetch starts is :func:`next_offset` of them.

    Raises:
        OffsetOutOfRangeError: ``offset`` below the log start offset or above the high watermark.
    """

    def read() -> pa.Table:
        return part.log.read(offset, max_bytes=max_bytes, columns=columns, isolation_level=isolation_level,
                             control_records=control_records)

    table = await asyncio.to_thread(read)
    if table.num_rows == 0 and next_offset(table, offset) == offset and max_wait_ms > 0:
        await part.wait_until(lambda: readable_end(part, isolation_level) > offset, max_wait_ms / 1000.0)
        table = await asyncio.to_thread(read)
    return table
