"""The schema of a partition log table (DESIGN.md, "Storage: the partition log table").

One Delta table per replica of a partition, at ``{log.dirs}/{topic}-{partition}``. The Arrow schema
below is what the broker writes with delta-rs; delta-spark reads the same table as::

    offset long, timestamp timestamp, key binary, value binary,
    headers array<struct<key: string, value: binary>>, leader_epoch int,
    producer_id long, producer_epoch short, sequence int

``timestamp`` holds milliseconds since the epoch (CreateTime or LogAppendTime per the topic's
``message.timestamp.type``) stored as a UTC microsecond timestamp, Delta's only timestamp type.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log_tables.zero_columns import zeros

HEADER_TYPE = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

LOG_SCHEMA = pa.schema([
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", TIMESTAMP_TYPE, nullable=False),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", HEADERS_TYPE),
    pa.field("leader_epoch", pa.int32(), nullable=False),
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int16()),
    pa.field("sequence", pa.int32()),
])

#: The segment tail's extra column (never in the Delta table): Kafka's record batch attributes, per record.
ATTRIBUTES = "attributes"
#: Attribute bit of a record written inside a transaction (Kafka's ``RecordBatch`` attributes bit 4).
TRANSACTIONAL_BIT = 0x10
#: Attribute bit of a control record, a transaction's commit or abort marker (Kafka's bit 5).
CONTROL_BIT = 0x20

#: The rows of the segment tail, the tail cache and a replica fetch: the log's columns plus
#: :data:`ATTRIBUTES` (int8; 0 for a record outside any transaction). The flusher drops control records,
#: aborted records and the column itself before it commits to Delta, so the table holds plain, decided
#: records only (DESIGN.md, "Storage"), and reads from the table see attributes 0.
TAIL_SCHEMA = LOG_SCHEMA.append(pa.field(ATTRIBUTES, pa.int8(), nullable=False))

#: The record columns a fetch returns (to consumers and over HTTP): what ``PartitionLog.read`` is asked
#: for by the fetch route and by consumer instances, and what a leader's Arrow fetch answer holds.
FETCH_COLUMNS = ["offset", "timestamp", "key", "value", "headers"]


def with_attributes(batch: pa.Table, attributes: "pa.Array | None" = None) -> pa.Table:
    """``batch`` (log schema) with the :data:`ATTRIBUTES` column appended: ``attributes`` (int8, one a
    row), or zeros. A batch that has the column already is returned as it is."""
    if ATTRIBUTES in batch.column_names:
        return batch
    if attributes is None:
        attributes = zeros(batch.num_rows, pa.int8())  # not resident (zero_columns)
    return batch.append_column(TAIL_SCHEMA.field(ATTRIBUTES), attributes)


def table_dir_name(topic: str, partition: int) -> str:
    """Directory name of a partition's table under a log dir: ``{topic}-{partition}`` (Kafka's)."""
    return f"{topic}-{partition}"


def timestamps_us(column: "pa.Array | pa.ChunkedArray") -> "pa.Array | pa.ChunkedArray":
    """A ``timestamp`` column as int64 microseconds since the epoch, whatever its unit (s, ms, us, ns;
    the log stores us, the Arrow fetch answers ms); an integer column is taken as microseconds already."""
    if pa.types.is_timestamp(column.type):
        return pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
    return column
