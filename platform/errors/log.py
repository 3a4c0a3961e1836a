"""Errors of the partition log (:mod:`lakelog.log_tables`), re-exported by ``lakelog.log_tables.errors``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.errors.base import LakelogError

if TYPE_CHECKING:
    from lakelog.log_tables.offset_scan import DataLoss

__all__ = ["CommitFailedError", "DataLossError", "FencedLeaderEpochError", "InvalidTimestampError",
           "LakeUnavailableError", "LogClosedError", "LogStorageError", "LogTableError", "NonContiguousOffsetsError", "ObjectStoreStartError",
           "OffsetOutOfRangeError", "RecordTooLargeError", "RecordWithoutKeyError",
           "TransactionsNeedTailError", "TypedColumnsNotReadyError", "UnreadableBatchError"]


class LogTableError(LakelogError):
    """The partition log failed."""


class OffsetOutOfRangeError(LogTableError):
    """The requested offset is not within the range of offsets held by the partition.

    Kafka: OFFSET_OUT_OF_RANGE (1). 422 / 42226 (lakelog's code; REST Proxy's 42202 is a missing value
    schema, kafka-rest ``Errors.java``).
    """

    http_status = 422
    error_code = 42226

    def __init__(self, *, topic: str, partition: int, offset: int, log_start_offset: int,
                 high_watermark: int) -> None:
        super().__init__(
            f"Offset {offset} is out of range for {topic}-{partition}: valid offsets are "
            f"{log_start_offset} (log start offset) to {high_watermark} (high watermark; "
            f"fetching at it waits for new records)."
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


class RecordTooLargeError(LogTableError):
    """A record is larger than the topic's ``max.message.bytes``.

    Kafka: MESSAGE_TOO_LARGE (10). 422 / 42225 (lakelog's code; REST Proxy's 42201 is a missing key
    schema, kafka-rest ``Errors.java``).
    """

    http_status = 422
    error_code = 42225


class CommitFailedError(LogTableError):
    """The Delta commit of a batch failed; nothing of the batch was acknowledged.

    The outcome of a failed commit is ambiguous until the log is re-read, which the log does before
    it takes the next batch. Retriable.
    """

    http_status = 503
    error_code = 50322  # lakelog's code (REST Proxy's 50301: no consumer available in its pool)
    retriable = True


class TypedColumnsNotReadyError(CommitFailedError):
    """A Delta commit of a schema'd topic cannot decode its typed columns yet: the broker's schema registry
    view has not caught up with ``_schemas`` since the broker started. Nothing is committed and the next
    flush round tries again (retriable, as :class:`CommitFailedError`), so no record gets a null typed value
    for good only because its schema was not read yet."""


class LogClosedError(LogTableError):
    """The partition log is closed (the broker is shutting down or the partition moved away)."""

    http_status = 503
    error_code = 50323  # lakelog's code (REST Proxy's 50302: broker not available, rest-utils)
    retriable = True


class FencedLeaderEpochError(LogTableError):
    """An append carries a leader epoch older than the newest epoch already in the log.

    A deposed leader can append nothing: once records of a newer leader epoch are in the replica's
    log (or the replica has seen that epoch), appends stamped with an older epoch are refused.
    Kafka: FENCED_LEADER_EPOCH (74), KIP-101/KIP-320. Retriable: the client looks up the new leader.
    """

    http_status = 421
    error_code = 42102
    retriable = True


class NonContiguousOffsetsError(LogTableError):
    """A replicated batch does not continue the log: it does not start at the log end offset, or its
    offsets are not dense where the leader declared no range with gaps, or lie outside the declared range.

    A follower appends the leader's records with the leader's offsets; a batch without a declared range
    continues the log exactly (``offset[0] == log end offset``, each next offset one more); one with a
    range (a compacted part of the leader's log) starts at the log end offset and its offsets increase
    within the range (:func:`~lakelog.log_tables.records.check_replicated`).
    """

    http_status = 409
    error_code = 40911
    retriable = True


class InvalidTimestampError(LogTableError):
    """A record's timestamp is outside what the log can store and read back: -1 (none) or 0 to
    9223372036854775 ms (the largest millisecond count whose microseconds fit the log's int64
    ``timestamp[us]`` column). Nothing was written.

    Kafka: INVALID_TIMESTAMP (32). 422 / 42221.
    """

    http_status = 422
    error_code = 42221


class UnreadableBatchError(LogTableError):
    """A batch about to be appended does not have the log's exact column types or holds a value the
    log could not read back; nothing was written (a bug of the writer, never acknowledged). 500 / 50020."""

    http_status = 500
    error_code = 50020


class RecordWithoutKeyError(LogTableError):
    """A record without a key was produced to a compacted topic (``cleanup.policy`` has ``compact``).

    The log cleaner keeps the latest record per key, so every record of a compacted topic needs a key;
    nothing of the batch was written. Kafka: INVALID_RECORD (87), "Compacted topic cannot accept message
    without key". 422 / 42223. Not retriable: send the record with a key (or produce to a topic whose
    ``cleanup.policy`` is ``delete``).
    """

    http_status = 422
    error_code = 42223

    def __init__(self, *, topic: str, partition: int, count: int = 1, message: str | None = None) -> None:
        super().__init__(message or (
            f"Compacted topic {topic} cannot accept a record without a key: {count} record(s) of the batch "
            f"to partition {partition} have no key (its cleanup.policy has compact: the log cleaner "
            f"keeps the latest record per key). Nothing was written; give every record a key, or produce "
            f"to a topic whose cleanup.policy is delete."))
        self.topic = topic
        self.partition = partition
        self.count = count


class TransactionsNeedTailError(LogTableError):
    """A transactional record (or marker) for a log without a segment tail (``lake.commit.interval.ms=0``,
    or a table on an object store): every append there is a Delta commit readers see at once, so an open
    transaction could not be kept from them. Nothing was written. 422 / 42224. Not retriable: produce
    transactions to a topic with ``lake.commit.interval.ms`` above 0 (the default).
    """

    http_status = 422
    error_code = 42224


class LogStorageError(LogTableError):
    """The partition's Delta table cannot be opened or read: its transaction log is unreadable, it names a
    protocol delta-rs does not support, it exists with another schema than the log's, or its storage cannot be
    reached (delta-rs' ``deltalake.exceptions.DeltaError`` and pyarrow's ``ArrowException``, wrapped where they
    enter: :meth:`PartitionLog.open <lakelog.log_tables.partition_log.PartitionLog.open>`). The message names
    the table and the library's error. Kafka: KAFKA_STORAGE_ERROR (56). 500 / 50021, not retriable: this
    broker cannot serve the partition until the table is repaired.
    """

    http_status = 500
    error_code = 50021


class DataLossError(LogTableError):
    """Offsets a reader needs are no longer in the partition log (retention or truncation removed them).

    Raised by :func:`lakelog.log_tables.reader.read_offset_range` when no ``on_data_loss`` callback is given. Not retriable:
    the records are gone.
    """

    http_status = 422
    error_code = 42229  # lakelog's code (REST Proxy's 42208 is a v3 produce batch error, kafka-rest Errors.java)

    def __init__(self, loss: "DataLoss", message: str | None = None) -> None:
        super().__init__(message or f"{loss.describe()} of the table {loss.table_uri}")
        self.loss = loss


class LakeUnavailableError(LogTableError):
    """A read needs records that are only in the partition's table in the shared lake (``lake.uri``), and
    the object store cannot be reached now (connection refused, timeouts, 5xx after delta-rs' retries). The
    newest records, in the segment tail, are still served, produce goes on, and the flusher commits the tail
    once the store is back. Kafka: KAFKA_STORAGE_ERROR (56), which its clients retry. 503 / 50331, retriable.
    """

    http_status = 503
    error_code = 50331
    retriable = True


class ObjectStoreStartError(LogTableError):
    """The embedded S3-compatible object store (s3proxy, :mod:`lakelog.runtime.object_store`) could not be
    started: Java or Maven missing, its jars not fetched, its port taken, or the server exited or did not
    answer in time. The message ends with the tail of the server's log. 503 / 50330, retriable (a busy
    port or a slow machine is often transient)."""

    http_status = 503
    error_code = 50330
    retriable = True
