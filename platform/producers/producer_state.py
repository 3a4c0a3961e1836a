"""Per-partition producer state: what an idempotent producer's retries are checked against.

Kafka's ``ProducerStateManager`` (KIP-98), for lakelog's request sequences: an idempotent producer
numbers its produce *requests* 0, 1, 2, ... (:mod:`lakelog.protocol.producer_headers`), one number for
all the partitions a request touches, so a partition sees each producer's sequences increasing but not
dense. For every producer id a replica keeps:

- the producer epoch of its latest append (an older epoch is fenced);
- the :data:`NUM_BATCHES_TO_RETAIN` highest sequences appended with their offsets (Kafka keeps the last 5
  batches). A request whose sequence is among them is a duplicate, answered with the original offsets; one
  below all of them (when 5 are kept) cannot be told apart and is refused (:class:`OutOfOrderSequenceError`);
  any other is new. Keeping the highest sequences (not the latest appended) makes this exact: every
  sequence at or above the lowest kept one that was ever appended is kept;
- when it last appended (broker time), for ``producer.id.expiration.ms``.

The state is derived from the log alone: every replica, leader and follower, folds each appended batch's
producer columns (``producer_id``, ``producer_epoch``, ``sequence``, ``offset``) in, so a follower that
becomes leader has it at once: a follower with :meth:`update` (one vectorised pass a batch), the leader
with :meth:`appended` (its group commit knows each request's producer, base offset and count). A replica that opens its
log loads the newest snapshot at or below its log end offset (Kafka's ``.snapshot`` files, here JSON in
``_producer_snapshots/`` inside the table directory, where VACUUM never looks) and reads the producer
columns of the log from there on (:meth:`load`); after a truncation it does the same.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.producers.errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError,
                                     UnknownProducerIdError)
from lakelog.protocol.producer_headers import ProducerBatch

log = logging.getLogger(__name__)

#: Sequences remembered per producer and partition (Kafka's ``ProducerStateEntry.NumBatchesToRetain``).
NUM_BATCHES_TO_RETAIN = 5
#: Directory of the snapshots inside a local table's directory (hidden from Delta: starts with ``_``).
SNAPSHOT_DIR = "_producer_snapshots"
#: Snapshots kept per replica (the newest ones; an older one serves after a truncation below the newest).
SNAPSHOTS_KEPT = 2
#: Producer columns read when the state is rebuilt from the log.
PRODUCER_COLUMNS = ["offset", "producer_id", "producer_epoch", "sequence"]
#: Arrow bytes read per step of a rebuild.
LOAD_BYTES = 64 * 1024 * 1024


class ReadableLog(Protocol):
    """What :meth:`ProducerStateManager.load` reads (a :class:`~lakelog.log_tables.partition_log.PartitionLog`)."""

    topic: str
    partition: int
    table_uri: str
    #: the replica's broker-local directory (producer snapshots go there); None = a table without one
    local_dir: "Path | None"

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def read(self, start_offset: int, *, max_bytes: int = ..., end_offset: int | None = ...,
             columns: list[str] | None = ..., control_records: bool = ...) -> pa.Table: ...


@dataclass(frozen=True)
class BatchMetadata:
    """One appended request of a producer on a partition: its sequence, first offset and record count."""

    sequence: int
    base_offset: int
    count: int


@dataclass
class ProducerStateEntry:
    """A producer's state on one partition: its epoch, last appended sequences (ascending) and when it
    last appended (ms since the epoch, broker time)."""

    producer_id: int
    producer_epoch: int
    last_append_ms: int
    batches: list[BatchMetadata] = field(default_factory=list)

    def find(self, sequence: int) -> BatchMetadata | None:
        """The remembered request with ``sequence``, or None."""
        i = bisect.bisect_left([b.sequence for b in self.batches], sequence)
        return self.batches[i] if i < len(self.batches) and self.batches[i].sequence == sequence else None

    def add(self, batch: BatchMetadata, *, producer_epoch: int, at_ms: int) -> None:
        """Fold in an appended request (a newer epoch forgets the older epoch's sequences; a request
        already kept, whose records a follower got in two fetches, grows)."""
        if producer_epoch > self.producer_epoch:
            self.producer_epoch, self.batches = producer_epoch, []
        self.last_append_ms = max(self.last_append_ms, at_ms)
        sequences = [b.sequence for b in self.batches]
        i = bisect.bisect_left(sequences, batch.sequence)
        if i < len(self.batches) and sequences[i] == batch.sequence:  # (the same rows again: no change)
            old = self.batches[i]
            base = min(old.base_offset, batch.base_offset)
            end = max(old.base_offset + old.count, batch.base_offset + batch.count)
            self.batches[i] = BatchMetadata(old.sequence, base, end - base)
            return
        self.batches.insert(i, batch)
        del self.batches[:-NUM_BATCHES_TO_RETAIN]


@dataclass(eq=False)
class OpenTransaction:
    """A producer's transaction that a partition leader adds, or added, the partition to (at the
    coordinator) and whose marker it has not written yet. Compared by identity: two transactions of one
    epoch differ. It is in place before the coordinator is asked, so a marker written meanwhile removes it
    (Kafka's ``VerificationGuard``, KIP-890).

    Attributes:
        producer_epoch: the producer's epoch.
        added: done once the coordinator answered (the partition added, or not: then the entry is gone);
            concurrent requests of the transaction wait for it instead of asking again.
    """

    producer_epoch: int
    added: asyncio.Future


class ProducerStateManager:
    """The producer state of one partition replica (see the module docstring).

    Args:
        topic, partition: which replica (for messages).
        snapshot_dir: where snapshots go; None = none (a table on an object store: rebuilt from the log).
        producer_id_expiration_ms: ``producer.id.expiration.ms``: a producer that appended nothing for
            this long is expired (:class:`UnknownProducerIdError`) and later removed. Default: 86400000
            (Kafka's, 1 day).

    Not thread-safe: the broker calls it from its event loop (a load runs before the replica is used).
    """

    def __init__(self, *, topic: str, partition: int, snapshot_dir: Path | None,
                 producer_id_expiration_ms: int = 86_400_000) -> None:
        self.topic, self.partition = topic, partition
        self.snapshot_dir = snapshot_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.entries: dict[int, ProducerStateEntry] = {}
        #: the state holds every producer batch below this offset (the log end offset it has seen)
        self.end_offset = 0
        #: the offset of the newest snapshot written (-1: none)
        self.snapshot_offset = -1
        #: requests being appended on the leader: (producer id, epoch, sequence) -> future of (base offset, count)
        self.in_flight: dict[tuple[int, int, int], asyncio.Future] = {}
        #: on the leader: producer id -> the transaction this partition was added to at its coordinator
        #: and whose marker has not been written here yet
        self.in_transaction: dict[int, OpenTransaction] = {}

    # -- checks ---------------------------------------------------------------------------------

    def check(self, producer: ProducerBatch, *, now_ms: int) -> BatchMetadata | None:
        """The original append of a retried request, or None when the request is new to this partition.

        Raises:
            UnknownProducerIdError: the producer's state here expired (``producer.id.expiration.ms``).
            InvalidProducerEpochError: an older epoch than the partition's (fenced).
            OutOfOrderSequenceError: a sequence below every one remembered (5 are remembered).
        """
        entry = self.entries.get(producer.producer_id)
        if entry is None:
            return None
        name = f"{self.topic}-{self.partition}"
        if now_ms - entry.last_append_ms > self.producer_id_expiration_ms:
            raise UnknownProducerIdError(
                f"Producer id {producer.producer_id} expired on {name}: nothing produced for more than "
                f"producer.id.expiration.ms={self.producer_id_expiration_ms}. Get a new producer id "
                "(POST /v3/clusters/{cluster_id}/producers); nothing was written.")
        if producer.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Producer {producer.producer_id} epoch {producer.producer_epoch} is fenced on {name}: epoch "
                f"{entry.producer_epoch} has produced there (a newer instance of the producer). Nothing was written.")
        if producer.producer_epoch > entry.producer_epoch:
            return None
        found = entry.find(producer.sequence)
        if found is not None:
            return found
        if len(entry.batches) >= NUM_BATCHES_TO_RETAIN and producer.sequence < entry.batches[0].sequence:
            raise OutOfOrderSequenceError(
                f"Sequence {producer.sequence} of producer {producer.producer_id} is older than the "
                f"{NUM_BATCHES_TO_RETAIN} requests {name} remembers (sequences {entry.batches[0].sequence} to "
                f"{entry.batches[-1].sequence}): it cannot tell whether it was written, so it writes nothing. "
                "A producer may have at most 5 requests in flight.")
        return None

    def admission_check(self, producer: ProducerBatch) -> Callable[[], None] | None:
        """For a leader's transactional request that passed :meth:`check` and joined its producer's
        transaction here, and now waits in the group commit: the test to run right before its records go
        into the log (:meth:`GroupCommitter.append <lakelog.log_tables.group_commit.GroupCommitter.append>`).
        None for a request outside transactions: only markers change what the test looks at.

        The returned callable raises, and nothing of the request is written, when meanwhile:

        - a marker of a newer epoch fenced the producer here (the coordinator bumped the epoch: a new
          instance of the producer, or its transaction timed out): InvalidProducerEpochError;
        - the transaction the request joined ended here (its commit or abort marker was written, e.g.
          a client that gave up on the request and committed): InvalidTxnStateError. Appended after the
          marker, its records would open a transaction no marker closes (the last stable offset stuck,
          Kafka's "hanging transaction", KIP-890) or join the producer's next one.

        Kafka validates the producer state at append time, under the log lock (``UnifiedLog.append``).
        """
        if producer.transactional_id is None:
            return None
        transaction = self.in_transaction.get(producer.producer_id)
        name = f"{self.topic}-{self.partition}"

        def check() -> None:
            entry = self.entries.get(producer.producer_id)
            if entry is not None and producer.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"Producer {producer.producer_id} epoch {producer.producer_epoch} was fenced on {name} while "
                    f"the request waited to be appended: a marker of epoch {entry.producer_epoch} was written "
                    "there (a newer instance of the producer, or the transaction timed out). Nothing was written.")
            if transaction is None or self.in_transaction.get(producer.producer_id) is not transaction:
                raise InvalidTxnStateError(
                    f"The transaction of producer {producer.producer_id} (epoch {producer.producer_epoch}) ended "
                    f"on {name} while the request waited to be appended: its commit or abort marker was written "
                    "first. Nothing was written; abort the transaction and produce the records in a new one.")
        return check

    # -- updates --------------------------------------------------------------------------------

    def update(self, batch: pa.Table, *, end_offset: int, at_ms: int | None = None) -> None:
        """Fold in an appended batch of log rows (at least the columns of :data:`PRODUCER_COLUMNS`), the
        log now ending at ``end_offset`` (a follower's append, a rebuild). One vectorised pass for the runs
        of equal (producer id, epoch, sequence), a request's records; rows without a producer id are
        skipped."""
        self.end_offset = max(self.end_offset, end_offset)
        if batch.num_rows == 0 or batch["producer_id"].null_count == batch.num_rows:
            return
        at_ms = int(time.time() * 1000) if at_ms is None else at_ms
        rows = batch.select(PRODUCER_COLUMNS)
        if rows["producer_id"].null_count:
            rows = rows.filter(pc.is_valid(rows["producer_id"]))
        if pc.min(rows["sequence"]).as_py() < 0:  # transaction markers: no sequence, maybe a newer epoch
            markers = pc.less(rows["sequence"], 0)
            self.markers_appended(rows.filter(markers), at_ms=at_ms)
            rows = rows.filter(pc.invert(markers))
            if rows.num_rows == 0:
                return
        # a request's records are contiguous: its rows are a run of equal (producer id, epoch, sequence)
        pids, epochs, seqs, offsets = (rows[c].to_numpy() for c in ("producer_id", "producer_epoch", "sequence",
                                                                   "offset"))
        starts = np.flatnonzero(np.concatenate(([True], (pids[1:] != pids[:-1]) | (epochs[1:] != epochs[:-1])
                                                | (seqs[1:] != seqs[:-1]))))
        ends = np.append(starts[1:], len(pids)) - 1
        for pid, epoch, seq, base, last in zip(pids[starts].tolist(), epochs[starts].tolist(), seqs[starts].tolist(),
                                               offsets[starts].tolist(), offsets[ends].tolist()):
            self._fold(pid, epoch, BatchMetadata(seq, base, last - base + 1), at_ms)

    def appended(self, requests: Iterable[tuple[ProducerBatch, int, int]], *, end_offset: int,
                 at_ms: int | None = None) -> None:
        """Fold in a leader's group commit, given as its idempotent requests ``(producer, base_offset,
        count)`` (:attr:`AppendInfo.producer_appends <lakelog.log_tables.log_writer.AppendInfo>`: what
        :meth:`update` would find in its rows, without reading them), the log now ending at ``end_offset``."""
        self.end_offset = max(self.end_offset, end_offset)
        at_ms = int(time.time() * 1000) if at_ms is None else at_ms
        for producer, base, count in requests:
            self._fold(producer.producer_id, producer.producer_epoch, BatchMetadata(producer.sequence, base, count),
                       at_ms)

    def markers_appended(self, markers: pa.Table, *, at_ms: int | None = None) -> None:
        """Fold in transaction markers (rows with ``producer_id`` and ``producer_epoch``), as
        :meth:`marker_appended` each."""
        for producer_id, producer_epoch in zip(markers["producer_id"].to_pylist(), markers["producer_epoch"].to_pylist()):
            self.marker_appended(producer_id, producer_epoch, at_ms=at_ms)

    def marker_appended(self, producer_id: int, producer_epoch: int, *, end_offset: int | None = None,
                        at_ms: int | None = None) -> None:
        """A transaction marker of ``producer_id`` was appended (the log now ending at ``end_offset``): its
        transaction here is over, and a marker written with a newer epoch (the coordinator bumped it: Kafka's
        InitProducerId fencing an older instance, or a timeout) fences the older epoch on this partition, as
        Kafka's ``appendEndTxnMarker`` does."""
        at_ms = int(time.time() * 1000) if at_ms is None else at_ms
        if end_offset is not None:
            self.end_offset = max(self.end_offset, end_offset)
        self.in_transaction.pop(producer_id, None)
        entry = self.entries.get(producer_id)
        if entry is None:
            self.entries[producer_id] = ProducerStateEntry(producer_id, producer_epoch, at_ms)
        elif producer_epoch > entry.producer_epoch:
            entry.producer_epoch, entry.batches, entry.last_append_ms = producer_epoch, [], at_ms

    def _fold(self, producer_id: int, producer_epoch: int, batch: BatchMetadata, at_ms: int) -> None:
        """One appended request of a producer into its entry."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerStateEntry(producer_id, producer_epoch, at_ms)
        elif producer_epoch < entry.producer_epoch:
            return  # a fenced epoch's batch replicated late: the newer epoch's state stands
        entry.add(batch, producer_epoch=producer_epoch, at_ms=at_ms)

    def remove_expired(self, *, now_ms: int) -> int:
        """Forget producers idle for longer than ``producer.id.expiration.ms``; returns how many."""
        expired = [pid for pid, e in self.entries.items()
                   if now_ms - e.last_append_ms > self.producer_id_expiration_ms]
        for pid in expired:
            del self.entries[pid]
        return len(expired)

    # -- snapshots and loading ------------------------------------------------------------------

    def snapshot(self) -> dict | None:
        """The state as a snapshot body (where the state is changed: the event loop), or None when
        there is no snapshot dir or nothing new since the last snapshot."""
        if self.snapshot_dir is None or self.end_offset == self.snapshot_offset:
            return None
        return {"version": 1, "end_offset": self.end_offset, "producers": [
            {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch, "last_append_ms": e.last_append_ms,
             "batches": [[b.sequence, b.base_offset, b.count] for b in e.batches]} for e in self.entries.values()]}

    def write_snapshot(self, body: dict) -> Path:
        """Write a :meth:`snapshot` body as ``{end_offset:020d}.snapshot`` (atomically: a crash leaves
        the older one) and keep the newest :data:`SNAPSHOTS_KEPT`. Blocking (file I/O)."""
        assert self.snapshot_dir is not None
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        path = self.snapshot_dir / f"{body['end_offset']:020d}.snapshot"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, separators=(",", ":")))
        os.replace(tmp, path)
        self.snapshot_offset = max(self.snapshot_offset, body["end_offset"])
        for old in self._snapshots()[:-SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)
        return path

    def take_snapshot(self) -> Path | None:
        """:meth:`snapshot` and :meth:`write_snapshot` in one (blocking; where nothing changes the state)."""
        body = self.snapshot()
        return None if body is None else self.write_snapshot(body)

    def _snapshots(self) -> list[Path]:
        """The snapshot files, oldest first."""
        if self.snapshot_dir is None or not self.snapshot_dir.is_dir():
            return []
        return sorted(self.snapshot_dir.glob("*.snapshot"))

    def _load_snapshot(self, *, max_offset: int) -> tuple[dict[int, ProducerStateEntry], int]:
        """The entries and offset of the newest readable snapshot at or below ``max_offset`` (none: ``{}``,
        -1); deletes those above it (written before a truncation)."""
        for path in reversed(self._snapshots()):
            offset = int(path.stem)
            if offset > max_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                body = json.loads(path.read_text())
                entries = {p["producer_id"]: ProducerStateEntry(
                    p["producer_id"], p["producer_epoch"], p["last_append_ms"],
                    [BatchMetadata(*b) for b in p["batches"]]) for p in body["producers"]}
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("%s-%d: producer snapshot %s unreadable (%s): skipped", self.topic, self.partition,
                            path, e)
                continue
            return entries, offset
        return {}, -1

    def load(self, plog: ReadableLog) -> int:
        """Rebuild the state from the newest snapshot at or below ``plog``'s log end offset and the
        producer columns of the log after it (all of the log without a snapshot). Call on open and after
        a truncation. Blocking (file and table reads). Returns the records read."""
        leo = plog.log_end_offset
        entries, snapshot_offset = self._load_snapshot(max_offset=leo)
        fresh = ProducerStateManager(topic=self.topic, partition=self.partition, snapshot_dir=None,
                                     producer_id_expiration_ms=self.producer_id_expiration_ms)
        fresh.entries = entries
        start, read = max(snapshot_offset, plog.log_start_offset), 0
        now = int(time.time() * 1000)
        while start < leo:
            rows = plog.read(start, max_bytes=LOAD_BYTES, end_offset=leo, columns=PRODUCER_COLUMNS,
                             control_records=True)  # transaction markers may bump a producer's epoch
            if rows.num_rows == 0:
                break
            last = rows["offset"][rows.num_rows - 1].as_py()
            fresh.update(rows, end_offset=last + 1, at_ms=now)  # the broker's clock: not expired on a restart
            read, start = read + rows.num_rows, last + 1
        # one swap: a snapshot taken meanwhile sees the old state or the new one
        self.entries, self.end_offset, self.snapshot_offset = fresh.entries, leo, snapshot_offset
        return read

    def truncated(self, plog: ReadableLog) -> None:
        """The log was truncated (or reset): rebuild the state when it held a batch at or above the new
        log end offset (an older batch it forgot for that one may be below), else just forget the
        snapshots above it. Blocking."""
        leo = plog.log_end_offset
        if leo < plog.log_start_offset or any(
                b.base_offset + b.count > leo for e in self.entries.values() for b in e.batches):
            self.load(plog)
            return
        self.end_offset = min(self.end_offset, leo)
        for path in self._snapshots():
            if int(path.stem) > leo:
                path.unlink(missing_ok=True)
        if self.snapshot_offset > leo:
            self.snapshot_offset = -1
