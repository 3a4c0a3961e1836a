"""Errors of the partition log (``lakelog.log_tables``): the classes of :mod:`lakelog.errors.log`, the
name this package's modules import them by."""

from __future__ import annotations

from lakelog.errors.log import (
    CommitFailedError,
    DataLossError,
    FencedLeaderEpochError,
    InvalidTimestampError,
    LogClosedError,
    LogStorageError,
    LogTableError,
    NonContiguousOffsetsError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    RecordWithoutKeyError,
    TransactionsNeedTailError,
    UnreadableBatchError,
)

__all__ = ["CommitFailedError", "DataLossError", "FencedLeaderEpochError", "InvalidTimestampError",
           "LogClosedError", "LogStorageError", "LogTableError", "NonContiguousOffsetsError",
           "OffsetOutOfRangeError", "RecordTooLargeError", "RecordWithoutKeyError",
           "TransactionsNeedTailError", "UnreadableBatchError"]
