"""Where a partition's log table is and which of its offsets readers may see: :class:`PartitionLogInfo`.

One model for both ends of ``GET /lakelog/v1/topics/{topic}/logs``: the gateway answers a JSON list of
them (``?partition=p``: a list of one), and direct readers (the Spark source, SQL views over topics)
parse that list back into them::

    GET /lakelog/v1/topics/orders/logs
    200 [{"topic": "orders", "partition": 0, "table_uri": "/data/logs/orders-0",
          "log_start_offset": 0, "lake_end_offset": 100, "log_end_offset": 120,
          "high_watermark": 118, "leader_epoch": 3, "timestamp_type": 0, "last_stable_offset": 118,
          "table_version": 12, "table_files": 4, "size_bytes": 81234}, ...]

Every field is required (no defaults) except ``last_stable_offset``, which is the high watermark when a
body lacks it (a broker that knows no transactions), and the table facts ``table_version``,
``table_files`` and ``size_bytes`` (None when a body lacks them), so a body parses the same whether it
is read with this model or by the gateway. The model is immutable and checks the invariants a reader relies on (see
:class:`PartitionLogInfo`).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CREATE_TIME", "LOG_APPEND_TIME", "PartitionLogInfo"]

#: ``timestamp_type`` values, Kafka's ``TimestampType.id`` (also the Kafka source's ``timestampType`` column).
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class PartitionLogInfo(BaseModel):
    """Where a partition's Delta table is and which offsets readers may see (lakelog's own).

    JSON shape (all fields required)::

        {"topic": str, "partition": int, "table_uri": str, "log_start_offset": int, "lake_end_offset": int,
         "log_end_offset": int, "high_watermark": int, "leader_epoch": int, "timestamp_type": int,
         "last_stable_offset": int}

    Attributes:
        topic: topic name (Kafka's legal characters: ``[a-zA-Z0-9._-]``).
        partition: partition number, >= 0.
        table_uri: URI or path of the partition's Delta table on its leader
            (``{log.dirs}/{topic}-{partition}``), anything both delta-rs and Spark can open.
        log_start_offset: first offset still in the log (retention may have removed earlier ones).
        lake_end_offset: the first offset not yet in the Delta table (the two-tier log's flusher moves
            it up behind the high watermark): the table holds ``log_start_offset <= offset <
            lake_end_offset``; the rest, up to the high watermark, is in the leader's segment tail
            (Arrow fetch).
        log_end_offset: the offset the next appended record gets (LEO, on the leader).
        high_watermark: first offset not yet replicated to the ISR; readers see only
            ``log_start_offset <= offset < high_watermark``.
        leader_epoch: the leader's epoch when it answered.
        timestamp_type: 0 = CreateTime, 1 = LogAppendTime (the topic's ``message.timestamp.type``;
            see :attr:`lakelog.config.TopicConfig.timestamp_type_id`).
        last_stable_offset: Kafka's LSO, the first offset of a still-open transaction, at most the high
            watermark (the end of what read_committed readers see); the high watermark when absent. The
            Delta table never holds records of open or aborted transactions, so ``lake_end_offset`` never
            passes it.
        table_version: the Delta table's version on the leader (its last commit); None when not given.
        table_id: the leader's Delta table's ``metaData.id``; a reader opening ``table_uri`` elsewhere (another
            machine may hold another replica's table at the same path) checks it. None when not given.
        table_files: the data files of that version (Parquet files the table lists); None when not given.
        size_bytes: bytes on the leader's disk of its replica: data files (also removed ones VACUUM has
            not deleted yet), ``_delta_log`` and the segment tail (Kafka's ``kafka.log:type=Log,name=Size``);
            None for an object-store table or when not given.

    Raises:
        pydantic.ValidationError (a ``ValueError``): a field is missing or of the wrong type,
        ``partition < 0``, not ``0 <= log_start_offset <= high_watermark``, not ``0 <= last_stable_offset <=
        high_watermark``, or ``timestamp_type`` is
        neither 0 nor 1. Assigning to a field raises too (the model is frozen).
    """

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int
    table_uri: str
    log_start_offset: int
    lake_end_offset: int
    log_end_offset: int
    high_watermark: int
    leader_epoch: int
    timestamp_type: int = Field(description="0 = CreateTime, 1 = LogAppendTime")
    last_stable_offset: int = Field(-1, description="First offset of an open transaction, at most the high "
                                                    "watermark (absent: the high watermark)")
    table_version: Optional[int] = Field(None, description="The Delta table's version on the leader")
    table_id: Optional[str] = Field(None, description="The leader's Delta table's id (metaData.id): a direct reader "
                                                      "checks that the table it opens at table_uri is this one")
    table_files: Optional[int] = Field(None, description="Data files in that version of the table")
    size_bytes: Optional[int] = Field(None, description="Bytes on the leader's disk of its replica (data files, "
                                                        "_delta_log, segment tail); null for an object store")

    @model_validator(mode="before")
    @classmethod
    def _default_last_stable_offset(cls, data):
        if isinstance(data, dict) and data.get("last_stable_offset") is None and "high_watermark" in data:
            data = {**data, "last_stable_offset": data["high_watermark"]}
        return data

    @model_validator(mode="after")
    def _check_offsets(self) -> "PartitionLogInfo":
        if self.partition < 0:
            raise ValueError(f"partition must be >= 0, got {self.partition}")
        if self.log_start_offset < 0 or self.high_watermark < self.log_start_offset:
            raise ValueError(f"need 0 <= log_start_offset <= high_watermark, got "
                             f"{self.log_start_offset} and {self.high_watermark} for {self.topic}-{self.partition}")
        if not 0 <= self.last_stable_offset <= self.high_watermark:
            raise ValueError(f"need 0 <= last_stable_offset <= high_watermark, got {self.last_stable_offset} and "
                             f"{self.high_watermark} for {self.topic}-{self.partition}")
        if self.timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), got {self.timestamp_type}")
        return self
