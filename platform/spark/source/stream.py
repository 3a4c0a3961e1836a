"""Streaming reads: ``spark.readStream.format("lakelog")`` as micro-batches of offset ranges.

Streaming offsets are JSON objects ``{"topic": {"partition": next_offset}}``, keys sorted, so the same
position always serialises to the same text (Spark compares offsets as JSON strings).

A micro-batch ends at most at each partition's high watermark with ``lakelog.read.tail=true`` (the
default for streams: its tasks read the offsets past the lake end offset from the partition leaders),
or at its lake end offset with ``false`` (Delta only; records arrive once the broker's flusher
committed them, every ``lake.commit.interval.ms``). See
:func:`~lakelog.spark.source.planning.latest_offsets`.

PySpark 4.2.0 specifics (checked in ``pyspark/sql/datasource.py``, ``sql/streaming/datasource.py``,
``sql/worker/plan_data_source_read.py``, ``sql/streaming/python_streaming_source_runner.py`` and the
JVM's ``PythonMicroBatchStream``):

- ``read()`` may yield ``pyarrow.RecordBatch`` es; they must carry exactly the schema's columns, and the
  first batch's Arrow schema must equal ``to_arrow_schema(schema, timezone="UTC")`` (else
  ``DATA_SOURCE_RETURN_SCHEMA_MISMATCH``).
- Admission control (Spark 4.2): the runner (``check_support_func``) sees ``latestOffset(start,
  limit)`` take arguments, so Spark plans with ``PythonMicroBatchStreamWithAdmissionControl``: it asks
  :meth:`~LakelogStreamReader.getDefaultReadLimit` once, then for every trigger calls
  ``latestOffset(start, limit)`` with the previous batch's end (``initialOffset()`` for a new query, the
  checkpoint's last offsets after a restart) and that limit, or ``ReadAllAvailable`` when it wants
  everything. Limits cross to the JVM as JSON of the built-in ``ReadLimit`` dataclasses only
  (``ReadLimitRegistry``): no ``CompositeReadLimit`` as Kafka's source has for min and max together.
- ``trigger(availableNow=True)``: the reader is a ``SupportsTriggerAvailableNow``, so Spark uses
  ``PythonMicroBatchStreamWithTriggerAvailableNow``, calls ``prepareForTriggerAvailableNow()`` once,
  runs batches while ``latestOffset`` moves, and stops when it returns its start.
- ``commit(end)`` of batch N is called when Spark plans batch N+1 (which an idle stream never
  does, nor the last batch of an availableNow run), so the reader also commits ``start`` to
  its group (``kafka.group.id`` or ``groupIdPrefix``) at each ``latestOffset(start, limit)``: Spark asks
  for new offsets only after the previous batch is in its commit log. So the group holds the end of the
  last batch when an availableNow run ends (its last ``latestOffset`` call) and when a query with the
  default trigger stops (Spark asks again right after each batch). With a ``processingTime`` trigger,
  Spark asks only at the next trigger: a query stopped in between leaves its group one batch behind,
  and ``stop()`` cannot tell whether the batch it planned last finished, so it commits nothing. The
  checkpoint stays the query's own source of truth; the group's offsets are what lag tools see.
- Spark keeps the initial offsets of a Kafka stream in its checkpoint; a Python source has no such
  place, so if a query dies before its first batch commits, the restarted query computes
  ``startingOffsets`` again (with ``latest`` it then starts later).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)
from pyspark.sql.types import StructType

from lakelog.client import LakelogClient
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark.source.options import SourceOptions, TopicPartition, offsets_from_json, offsets_to_json
from lakelog.spark.source.planning import (OffsetRangePartition, _Cluster, latest_offsets, micro_batch_ranges,
                                           rate_limit, resolve_starting_offsets, split_ranges)
from lakelog.spark.source.read import read_partition, tail_fetch

log = logging.getLogger(__name__)

__all__ = ["CAN_COMMIT_OFFSETS", "LakelogStreamReader"]

#: Whether this client can commit consumer-group offsets (``LakelogClient.commit_offsets``).
CAN_COMMIT_OFFSETS = hasattr(LakelogClient, "commit_offsets")


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("lakelog")``: micro-batches of offset ranges.

    One instance lives in the driver's Python streaming runner for the whole run of a query (Spark
    calls ``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` on it); executors use a
    pickled copy only for :meth:`read`, which is stateless.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._cluster = _Cluster(options)
        self._initial: dict[TopicPartition, int] | None = None
        self._position: dict[TopicPartition, int] | None = None  # where the next micro-batch starts
        self._states: dict[TopicPartition, PartitionLogInfo] = {}
        self._last_trigger = time.monotonic()
        self._available_now: dict[TopicPartition, int] | None = None  # an availableNow run's end
        self._committed_version = -1
        self._warned_commit = False
        prefix = options.group_id_prefix
        #: the group this stream commits to (``kafka.group.id``, else ``{groupIdPrefix}-{uuid}``), or None
        self.group_id: str | None = options.group_id or (f"{prefix}-{uuid.uuid4()}" if prefix else None)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_states"] = {}
        return state

    def _refresh(self) -> dict[TopicPartition, PartitionLogInfo]:
        self._states = self._cluster.partitions()
        return self._states

    def initialOffset(self) -> dict:
        """Where a new query starts: the resolved starting options (``startingOffsets`` & co.), as offsets JSON.

        Computed once per reader (asks the gateway the first time).
        """
        if self._initial is None:
            self._initial = resolve_starting_offsets(self.options, self._refresh(), client=self._cluster.client)
            log.info("lakelog stream starts at %s", offsets_to_json(self._initial))
        return offsets_to_json(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        """The read limit of the options, which Spark passes back to :meth:`latestOffset` for each trigger.

        ``maxOffsetsPerTrigger`` -> ``ReadMaxRows``; else ``minOffsetsPerTrigger`` -> ``ReadMinRows``;
        else ``ReadAllAvailable``. Spark's Kafka source returns a ``CompositeReadLimit`` of both when
        both are set (``KafkaMicroBatchStream.getDefaultReadLimit``); a Python source can only return
        one of the built-in limits (``pyspark/sql/streaming/datasource.py``), so with both the limit is
        ``ReadMaxRows`` and :meth:`latestOffset` applies ``minOffsetsPerTrigger`` and
        ``maxTriggerDelay`` from the options whenever Spark did not ask for everything.
        """
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: fix the offsets this run ends at, the latest offsets now.

        :meth:`latestOffset` never goes past them (a partition that appears later is not read in this
        run), so the query processes what was there when it started, in as many micro-batches as the
        read limit makes, and then stops (Spark stops once ``latestOffset`` returns its start).
        ``minOffsetsPerTrigger`` does not hold batches back in such a run (else it could end early).
        """
        # where this run starts is Spark's (the checkpoint, or initialOffset for a new query): the starting
        # options are not resolved again here (a restarted query never re-reads them, as Kafka's source)
        start = self._position or {}
        opts = self.options
        self._available_now = latest_offsets(self._refresh(), start, tail=bool(opts.read_tail),
                                             read_committed=opts.isolation_level == "read_committed")
        log.info("lakelog availableNow run ends at %s", offsets_to_json(self._available_now))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the micro-batch starting at ``start``, as offsets JSON ``{"topic": {"partition": offset}}``.

        Spark's admission control (Spark 4.2): ``start`` is ``initialOffset()`` for a query's first
        batch, else the end of the previous batch (from the checkpoint after a restart); ``limit`` is
        :meth:`getDefaultReadLimit`'s or ``ReadAllAvailable`` when Spark wants everything.

        The latest offsets now (:func:`~lakelog.spark.source.planning.latest_offsets`: the high
        watermarks with ``lakelog.read.tail=true``, the default for streams, or the last stable offsets
        with ``isolation.level=read_committed``; else the lake end offsets), at most the offsets fixed by
        :meth:`prepareForTriggerAvailableNow` in an availableNow run. Unless ``limit`` is
        ``ReadAllAvailable``: ``start`` again (no new batch) while fewer than ``minOffsetsPerTrigger``
        offsets are there and ``maxTriggerDelay`` has not passed since the last batch, and at most
        ``ReadMaxRows`` offsets (``maxOffsetsPerTrigger``, split across partitions by their backlog,
        :func:`~lakelog.spark.source.planning.rate_limit`). With a group (:attr:`group_id`) it first commits ``start``
        (see the module docstring), except at a new query's first call, when nothing is processed yet.
        """
        opts = self.options
        begin = offsets_from_json(start)
        first_of_new_query = self._position is None and begin == self._initial  # nothing processed yet
        if self.group_id and not first_of_new_query:
            # Spark runs micro-batches one after another and asks for the next batch's offsets only
            # once the previous one is in the commit log: everything below ``start`` is processed.
            # Committing it here (not only in commit(), which Spark calls when it plans a *new*
            # batch) keeps the group's offsets current when the stream goes idle or a run ends.
            self.commit(start)
        states = self._refresh()
        latest = latest_offsets(states, begin, tail=bool(opts.read_tail),
                                read_committed=opts.isolation_level == "read_committed")
        target = self._available_now
        if target is not None:
            latest = {tp: min(end, max(target[tp], begin.get(tp, 0))) for tp, end in latest.items() if tp in target}
        end = latest
        now = time.monotonic()
        if not isinstance(limit, ReadAllAvailable):
            if opts.min_offsets_per_trigger is not None and target is None:
                available = sum(max(0, until - max(begin.get(tp, 0), states[tp].log_start_offset))
                                for tp, until in latest.items())
                delayed_ms = (now - self._last_trigger) * 1000
                if available < opts.min_offsets_per_trigger and delayed_ms < opts.max_trigger_delay_ms:
                    return offsets_to_json(begin)  # wait for more records (or for maxTriggerDelay)
            if isinstance(limit, ReadMaxRows):
                end = rate_limit(begin, latest, {tp: s.log_start_offset for tp, s in states.items()},
                                 limit.max_rows)
        if end != begin:
            self._last_trigger = now
        self._position = dict(end)
        return offsets_to_json(end)

    def partitions(self, start: dict, end: dict) -> list[OffsetRangePartition]:
        """The Spark tasks of the micro-batch ``start`` to ``end`` (offsets JSON); ``end`` becomes the position.

        A partition new since ``start`` is read from offset 0 (what retention removed of it is data
        loss). The ranges carry the lake end offsets the reader saw last: what lies past them is
        fetched from the leaders (see :func:`~lakelog.spark.source.planning.micro_batch_ranges`).

        Raises:
            SourceError: with ``failOnDataLoss=true``, partitions that are gone (topic deleted) or whose
                end lies before their start (log truncated). Else a warning and nothing read of them.
        """
        s, e = offsets_from_json(start), offsets_from_json(end)
        # Spark plans every batch it runs through here: the end is where the next batch starts.
        self._position = dict(e)
        if s == e:
            return []
        states = self._states
        if any(tp not in states for tp in e):
            states = self._refresh()
        # Spark starts batch 0 at initialOffset(). When it re-runs an uncommitted batch 0 after a
        # restart, this (new) reader computed the initial offsets again, and "latest" (or "earliest"
        # after retention) may now lie past that batch's end: the query starts later than it first
        # did (Spark's Kafka source keeps its initial offsets in the checkpoint; a Python source has
        # no place for them). That is no data loss of an already started stream: skip quietly.
        rerun_of_first_batch = self._initial is not None and s == self._initial
        ranges = micro_batch_ranges(states, s, e, fail_on_data_loss=self.options.fail_on_data_loss,
                                    first_batch_rerun=rerun_of_first_batch)
        return split_ranges(ranges, min_partitions=self.options.min_partitions,
                            max_records_per_partition=self.options.max_records_per_partition)

    def read(self, partition: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
        """The rows of one task (:func:`lakelog.spark.source.read.read_partition`); runs in executors."""
        return read_partition(partition, self.schema, fail_on_data_loss=self.options.fail_on_data_loss,
                              tail=tail_fetch(self.options), mode=self.options.read_mode,
                              lake_storage=self.options.lake_storage)

    def commit(self, end: dict) -> None:
        """Spark processed everything up to ``end``: commit it as the stream's group's offsets, if it has one.

        The group is ``kafka.group.id`` (or ``group.id``), else ``{groupIdPrefix}-{uuid}`` (a new group for
        each run of the query, as Spark's Kafka source generates its group ids); with neither option
        nothing is committed (:attr:`group_id` is None).

        The commit is ``LakelogClient.commit_offsets(group, offsets, transaction_app_id=group,
        transaction_version=sum of the end offsets)``: one Delta transaction, a no-op when that app id
        and version were committed already (a replay after a restart). The sum grows with every
        micro-batch as offsets only move forward. A failed commit is logged, not raised: the
        checkpoint, not the group, is where the query resumes.
        """
        offsets = offsets_from_json(end)
        if self._position is None:
            self._position = dict(offsets)
        group = self.group_id
        if not group:
            return
        if not CAN_COMMIT_OFFSETS:
            if not self._warned_commit:
                log.warning("group.id=%s is set but this lakelog client has no commit_offsets(); "
                            "offsets are not committed to the group", group)
                self._warned_commit = True
            return
        version = sum(offsets.values())
        if version <= self._committed_version:
            return
        try:
            self._cluster.client.commit_offsets(
                group, [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())],
                transaction_app_id=group, transaction_version=version)
            self._committed_version = version
        except Exception as e:  # noqa: BLE001 - the checkpoint stays authoritative
            log.warning("committing offsets %s of group %s failed: %s", offsets_to_json(offsets), group, e)

    def stop(self) -> None:
        """Close the reader's gateway client (Spark calls it when the query stops)."""
        self._cluster.close()

