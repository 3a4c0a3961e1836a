"""Group commit: concurrent produce requests to one partition share one append.

An append costs time whatever its size (a frame written to the segment tail; a whole Delta commit for a
log without a tail), so the broker does not append per request. Requests for a partition queue here;
a committer task of the partition, started by the first request and ended once nothing is queued
(an idle partition has no task), takes everything queued — waiting up to ``linger.ms`` after the first
request for more, or less once ``batch.size`` bytes are queued — and appends it as one batch. Requests
that arrive while an append runs go into the next one, so under load batches grow by themselves.

Steps of one group commit (mirrored by comments in :meth:`GroupCommitter._commit_loop`):

1. (the first request started the task) linger until ``linger_ms`` passed or ``batch_size`` bytes queued;
2. take the queued requests (at least one, up to ``batch_size`` bytes) as one Arrow table; a request
   whose ``check`` raises now is answered with that error and left out (the producer state's test that
   its producer was not fenced, and its transaction not ended by a marker, while it waited here: Kafka
   validates the producer state at append time, under the log lock);
3. append it to the log: offsets assigned, one frame of the segment tail (written in the event loop
   when it is small and no fsync is asked for, or when a request of it had a check; else in a worker
   thread) or one Delta transaction;
4. hand the append, with each idempotent request's producer, base offset and count, to ``on_append``
   (the replica manager folds those into the producer state and moves the high watermark);
5. answer each request with the offset of its first record, or every request with the error;
6. without a tail: when the table holds more than ``segment_files_max`` data files, merge the oldest
   small ones (:meth:`LogLifecycle.merge_head <lakelog.log_tables.lifecycle.LogLifecycle.merge_head>`):
   a delta-rs commit costs time per file in the table.
   (With a tail the flusher does this after its commits.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lakelog.errors import LakelogError
from lakelog.log_tables.errors import LogClosedError
from lakelog.log_tables.file_merges import merge_if_needed
from lakelog.log_tables.log_metrics import LogMetrics
from lakelog.log_tables.partition_log import AppendInfo, PartitionLog
from lakelog.log_tables.schema import TRANSACTIONAL_BIT
from lakelog.protocol.producer_headers import ProducerBatch

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    records: pa.Table
    future: asyncio.Future
    producer: ProducerBatch | None = None
    check: Callable[[], None] | None = None


class GroupCommitter:
    """Batches the appends of one partition log into few Delta commits.

    Args:
        log: the partition log appended to.
        linger_ms: how long to wait for more requests after the first. Default: 0 (requests that
            arrive during an append still share the next one).
        batch_size: bytes of queued records that end the linger early (Arrow bytes). Default: 16 MiB.
        on_append: called with each :class:`AppendInfo` in the event loop after the commit, before
            the requests are answered; its ``producer_appends`` list the idempotent requests. Default: None.
        leader_epoch: callable returning the epoch to stamp on appended records. Default: 0.
        segment_files_max: data files after which the oldest small ones are merged; None = never.
            Default: 64.
        metrics: the broker's log histograms; each commit's append time and record count go there.
            Default: None (not observed).

    Must be created and used inside a running asyncio event loop.
    """

    def __init__(self, log: PartitionLog, *, linger_ms: float = 0.0, batch_size: int = 16 * 1024 * 1024,
                 on_append: Callable[[AppendInfo], None] | None = None,
                 leader_epoch: Callable[[], int] = lambda: 0, segment_files_max: int | None = 64,
                 metrics: LogMetrics | None = None) -> None:
        self.log = log
        self._metrics = metrics
        self.linger_s = linger_ms / 1000.0
        self.batch_size = batch_size
        self._on_append = on_append
        self._leader_epoch = leader_epoch
        self._segment_files_max = segment_files_max
        self._queue: list[_Pending] = []
        self._queued_bytes = 0
        self._full = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task | None = None  # the committer while requests are queued
        #: commits made and records in them (for metrics and tests)
        self.commits = 0
        self.records = 0

    async def append(self, records: pa.Table, *, producer: ProducerBatch | None = None,
                     check: Callable[[], None] | None = None) -> int:
        """Queue ``records`` (a normalised produce batch) and wait for their commit.

        ``producer``: an idempotent request's producer id, epoch and sequence, stored on each of its
        records (the log's producer columns). Default: None (nulls).
        ``check``: called in the event loop right before the records go into the log, with no await
        between (a batch with a check is appended in the event loop); what it raises is this call's error
        and nothing of the request is written. Default: None.

        Returns:
            The offset of the first record; the others follow densely.

        Raises:
            LogClosedError: the committer was closed.
            CommitFailedError: the commit failed; nothing of the request is in the log.
        """
        if self._closed:
            raise self._closed_error()
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(records, future, producer, check))
        self._queued_bytes += records.nbytes
        if self._queued_bytes >= self.batch_size:
            self._full.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._commit_loop(), name=f"commit-{self.log.topic}-{self.log.partition}")
        return await future

    async def _commit_loop(self) -> None:
        try:
            while self._queue:
                # 1. linger for more (or until batch.size bytes queued)
                if self.linger_s > 0 and self._queued_bytes < self.batch_size and not self._closed:
                    try:
                        await asyncio.wait_for(self._full.wait(), self.linger_s)
                    except asyncio.TimeoutError:
                        pass
                self._full.clear()
                # 2. take the queued requests, at least one, up to batch.size bytes
                taken, size = [], 0
                while self._queue and (not taken or size + self._queue[0].records.nbytes <= self.batch_size):
                    item = self._queue.pop(0)
                    taken.append(item)
                    size += item.records.nbytes
                self._queued_bytes -= size
                try:
                    await self._commit(taken)
                except asyncio.CancelledError:
                    _fail(taken, self._closed_error())
                    raise
                except Exception as e:
                    # one failed batch fails only its own requests; the committer goes on with the next
                    if isinstance(e, LakelogError):  # an expected error (not leader, commit failed)
                        log.info("group commit to %s-%d failed: %s", self.log.topic, self.log.partition, e,
                                 extra={"topic": self.log.topic, "partition": self.log.partition})
                    else:
                        log.exception("group commit to %s-%d failed", self.log.topic, self.log.partition,
                                      extra={"topic": self.log.topic, "partition": self.log.partition})
                    _fail(taken, e)
                    continue
                # 6. keep the file count (and so the cost of every commit) bounded; an optimisation, so a
                # failure is logged and the next commit tries again (with a tail, the flusher does it)
                if not self.log.tiered:
                    await merge_if_needed(self.log, segment_files_max=self._segment_files_max)
        finally:
            self._task = None  # nothing queued (or cancelled): the next request starts the committer again

    async def _commit(self, taken: list[_Pending]) -> None:
        """Steps 2-5 for the requests ``taken``: one append, then each request answered."""
        checked = any(p.check is not None for p in taken)
        if checked:  # 2. requests refused by their check now are answered with its error and left out
            taken = _passing(taken)
            if not taken:
                return
        batch = pa.concat_tables([p.records for p in taken]) if len(taken) > 1 else taken[0].records
        producers, attributes = _producer_columns(taken), _attributes(taken)
        # 3. one append = offsets + one frame of the tail (or one Delta transaction); after a check, in the
        #    event loop (a worker thread would let a marker written meanwhile go first)
        started = time.perf_counter()
        if checked or self.log.append_is_quick(batch.nbytes):
            info = self.log.append(batch, leader_epoch=self._leader_epoch(), producer_columns=producers,
                                   attributes=attributes)
        else:
            info = await asyncio.to_thread(self.log.append, batch, leader_epoch=self._leader_epoch(),
                                           producer_columns=producers, attributes=attributes)
        self.commits += 1
        self.records += info.count
        if self._metrics is not None:
            self._metrics.append_seconds.observe(time.perf_counter() - started)
            self._metrics.group_commit_records.observe(info.count)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("appended %d records in %d requests to %s-%d in %.2f ms", info.count, len(taken),
                      self.log.topic, self.log.partition, (time.perf_counter() - started) * 1000,
                      extra={"topic": self.log.topic, "partition": self.log.partition})
        bases = np.cumsum([info.base_offset] + [p.records.num_rows for p in taken]).tolist()
        # 4. the replica manager learns of the append (its idempotent requests into the producer state;
        #    moves the high watermark)
        if self._on_append is not None:
            info = replace(info, nbytes=batch.nbytes, producer_appends=() if producers is None else tuple(
                (p.producer, bases[i], bases[i + 1] - bases[i]) for i, p in enumerate(taken) if p.producer))
            try:
                self._on_append(info)
            except Exception:
                log.exception("on_append failed for %s-%d", self.log.topic, self.log.partition,
                              extra={"topic": self.log.topic, "partition": self.log.partition})
        # 5. answer each request with the offset of its first record
        for p, offset in zip(taken, bases):
            if not p.future.done():
                p.future.set_result(offset)

    def _closed_error(self) -> LogClosedError:
        return LogClosedError(f"The log of {self.log.topic}-{self.log.partition} is closed")

    async def close(self) -> None:
        """Commit what is queued, then stop; later appends raise :class:`LogClosedError`.

        Never raises: requests still queued when the committer stops (it did not finish in 30 s) fail
        with :class:`LogClosedError`.
        """
        self._closed = True
        self._full.set()
        task = self._task
        try:
            if task is not None:
                await asyncio.wait_for(asyncio.shield(task), timeout=30)
        except asyncio.TimeoutError:
            task.cancel()
            try:
                await task
            except BaseException:
                pass
        except asyncio.CancelledError:
            task.cancel()
            raise
        except Exception:
            log.exception("the committer of %s-%d failed", self.log.topic, self.log.partition,
                          extra={"topic": self.log.topic, "partition": self.log.partition})
        finally:
            queued, self._queue, self._queued_bytes = self._queue, [], 0
            _fail(queued, self._closed_error())


def _producer_columns(taken: list[_Pending]) -> tuple[pa.Array, pa.Array, pa.Array] | None:
    """The producer columns of the requests ``taken`` (one value a request, repeated for its records;
    null for a request without a producer), or None when none has one."""
    if all(p.producer is None for p in taken):
        return None
    counts = [p.records.num_rows for p in taken]
    plain = [p.producer is None for p in taken]
    # null where a request had no producer: one validity bitmap shared by the three columns
    validity = (pa.py_buffer(np.packbits(~np.repeat(plain, counts), bitorder="little")) if any(plain) else None)
    nulls = sum(c for c, is_plain in zip(counts, plain) if is_plain)

    def column(values: list[int], dtype: type) -> pa.Array:
        # built from numpy buffers: pa.array(..., type=, mask=) takes a per-value path, ~4x slower
        data = pa.array(np.repeat(np.array(values, dtype=dtype), counts))
        if validity is None:
            return data
        return pa.Array.from_buffers(data.type, len(data), [validity, data.buffers()[1]], null_count=nulls)
    return (column([p.producer.producer_id if p.producer else 0 for p in taken], np.int64),
            column([p.producer.producer_epoch if p.producer else 0 for p in taken], np.int16),
            column([p.producer.sequence if p.producer else 0 for p in taken], np.int32))


def _attributes(taken: list[_Pending]) -> pa.Array | None:
    """The attributes of the requests ``taken``: the transactional bit on each record of a request of a
    transaction, None when no request is transactional (the log writes zeros)."""
    flags = [TRANSACTIONAL_BIT if p.producer is not None and p.producer.transactional_id is not None else 0
             for p in taken]
    if not any(flags):
        return None
    return pa.array(np.repeat(np.array(flags, dtype=np.int8), [p.records.num_rows for p in taken]))


def _passing(taken: list[_Pending]) -> list[_Pending]:
    """The requests of ``taken`` whose check passes; the others are answered with what it raised."""
    passing = []
    for p in taken:
        try:
            if p.check is not None:
                p.check()
        except Exception as e:
            if not p.future.done():
                p.future.set_exception(e)
            continue
        passing.append(p)
    return passing


def _fail(pending: list[_Pending], error: BaseException) -> None:
    """Fail every request of ``pending`` not answered yet with ``error``."""
    for p in pending:
        if not p.future.done():
            p.future.set_exception(error)
