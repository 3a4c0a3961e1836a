"""The tail cache of a partition log: its newest appended batches, in memory, for tail fetches.

Consumers that keep up and followers fetch the newest records; those are served from the Arrow batches
the log just committed, without opening a data file. The cache holds whole batches, contiguous in
offsets, oldest first, within a byte budget (``log.tail.cache.max.bytes``): adding a batch evicts the
oldest ones while the cache is over budget, but always keeps the newest.

Reads take a :class:`CacheView`, an immutable picture of the cache (the cache replaces its view on every
change, so a reader never locks and never sees a half-made change).

A batch appended by a leader has dense offsets and one timestamp and leader epoch for all its records when
they took the broker's time (20 bytes a record of columns that say three numbers): the cache holds such a
batch as :class:`DenseBatch`, those columns as their first value, and a read builds them for the rows it
returns only, after cutting them to its byte budget by the sizes they will have, so what a read returns
(rows, columns, Arrow sizes) is what the whole batch would give.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.log_tables.schema import TAIL_SCHEMA, TIMESTAMP_TYPE

__all__ = ["CacheView", "TailCache"]


@dataclass(frozen=True)
class CacheView:
    """The cached batches at one moment: ``chunks[i]`` holds offsets from ``bases[i]`` on, below ``bases[i + 1]``.

    Attributes:
        bases: first offset of each batch, ascending.
        chunks: the batches (log schema), in offset order: an appended batch holds the dense offsets
            ``bases[i]`` .. ``bases[i] + rows - 1``, except a follower's replicated range with gaps (the
            leader compacted it; committed to the Delta table, not the segment tail): it covers ``bases[i]``
            up to the next base with fewer rows, possibly none. Reads handle both (:func:`_rows_between`).
    """

    bases: tuple[int, ...] = ()
    chunks: tuple["pa.Table | DenseBatch", ...] = ()

    @property
    def first_offset(self) -> int | None:
        """The oldest cached offset, or None when the cache is empty."""
        return self.bases[0] if self.bases else None

    def read(self, offset: int, upper: int, budget: int, out: list[pa.Table]) -> tuple[int, int]:
        """Append to ``out`` the cached rows ``offset <= o < upper``, up to about ``budget`` Arrow bytes.

        The first piece holds at least one row even if it is larger than ``budget`` (KIP-74: a fetch
        always makes progress); a piece that does not fit is cut to the rows that fit. Appended batches
        have dense offsets; a batch with gaps (or a gap between batches) is read by its ``offset``
        column, and an ``offset`` inside a gap reads from the next cached record on.

        Args:
            offset: first offset wanted; at least :attr:`first_offset`.
            upper: exclusive end offset.
            budget: Arrow bytes still wanted (> 0).
            out: list the slices (zero-copy) are appended to.

        Returns:
            ``(next offset, budget left)``: one past the last row returned.
        """
        bases, chunks = self.bases, self.chunks
        i = max(0, bisect.bisect_right(bases, offset) - 1)
        while i < len(chunks) and offset < upper and budget > 0 and bases[i] < upper:
            chunk, base = chunks[i], bases[i]
            lo, hi = _rows_between(chunk, base, max(offset, base), upper)
            if hi > lo:
                piece = chunk.slice(lo, hi - lo)
                size = piece.nbytes  # a sliced table's nbytes walks its buffers: once a piece
                cut = budget < size
                if cut:
                    piece = piece.slice(0, max(1, int(piece.num_rows * budget / max(size, 1))))
                    size = piece.nbytes
                if isinstance(piece, DenseBatch):
                    offset = piece.base + piece.num_rows
                    piece = piece.table()
                else:
                    offset = piece["offset"][-1].as_py() + 1
                out.append(piece)
                budget -= size
                if cut:
                    break  # the budget ends inside this batch
            i += 1
        return offset, budget


def _rows_between(chunk: pa.Table, base: int, start: int, upper: int) -> tuple[int, int]:
    """Row positions ``[lo, hi)`` of ``chunk`` (first offset ``base``) with ``start <= offset < upper``:
    by arithmetic when its offsets are dense (every appended batch), else by a search of its offsets."""
    n = chunk.num_rows
    if n == 0:
        return 0, 0
    if isinstance(chunk, DenseBatch) or chunk["offset"][-1].as_py() - base == n - 1:
        return min(n, max(0, start - base)), min(n, max(0, upper - base))
    lo, hi = np.searchsorted(chunk["offset"].to_numpy(), [start, upper], side="left")
    return int(lo), int(hi)


#: What one cached chunk costs beyond its Arrow buffers (Python and Arrow objects, allocator slack):
#: a cache of one-record batches is bounded by this, not by their few bytes of data.
CHUNK_OVERHEAD_BYTES = 2048
#: Runs of this many small chunks at the newest end are merged into one (fewer chunks to search and hold).
MERGE_RUN = 32
#: A chunk smaller than this (Arrow bytes) counts as small.
SMALL_CHUNK_BYTES = 64 * 1024


#: The columns a :class:`DenseBatch` holds as one value.
_DENSE_COLUMNS = ("offset", "timestamp", "leader_epoch")


@dataclass(frozen=True)
class DenseBatch:
    """A batch (tail schema) whose offsets are ``base``, +1, +2, ... and whose timestamps and leader epochs
    are one value each, held without those three columns (:func:`dense_batch`).

    Attributes:
        rest: the other columns.
        base: the first row's offset.
        timestamp: the timestamp of every row (a :data:`~lakelog.log_tables.schema.TIMESTAMP_TYPE` scalar).
        leader_epoch: the leader epoch of every row.
    """

    rest: pa.Table
    base: int
    timestamp: pa.Scalar
    leader_epoch: int

    @property
    def num_rows(self) -> int:
        return self.rest.num_rows

    @property
    def nbytes(self) -> int:
        """Arrow bytes of :meth:`table` (the three columns have no validity buffer: 20 bytes a row)."""
        return self.rest.nbytes + 20 * self.rest.num_rows

    def slice(self, offset: int, length: int) -> "DenseBatch":
        """Rows ``offset`` to ``offset + length`` (zero-copy), as :meth:`pyarrow.Table.slice`."""
        rest = self.rest.slice(offset, length)
        return DenseBatch(rest, self.base + min(offset, self.rest.num_rows), self.timestamp, self.leader_epoch)

    def table(self) -> pa.Table:
        """The rows with every column of the tail schema (the three built here)."""
        n = self.rest.num_rows
        built = {"offset": pa.array(np.arange(self.base, self.base + n, dtype=np.int64)),
                 "timestamp": pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(
                     np.full(n, self.timestamp.value, np.int64))]),
                 "leader_epoch": pa.array(np.full(n, self.leader_epoch, np.int32))}
        return pa.Table.from_arrays([built[name] if name in built else self.rest[name] for name in TAIL_SCHEMA.names],
                                    schema=TAIL_SCHEMA)


def dense_batch(base: int, batch: pa.Table) -> "pa.Table | DenseBatch":
    """``batch`` (tail schema, one chunk, first offset ``base``) as a :class:`DenseBatch` when its offsets
    are dense from ``base`` and its timestamps and leader epochs one value each, none of the three with
    a validity buffer (a leader's append of records that took the broker's time); else ``batch``.
    One min/max pass over the timestamps and epochs."""
    n = batch.num_rows
    if n < DENSE_MIN_ROWS or not batch.schema.equals(TAIL_SCHEMA) or any(
            batch[name].num_chunks != 1 or batch[name].chunk(0).buffers()[0] is not None for name in _DENSE_COLUMNS):
        return batch
    offsets = batch["offset"]
    if offsets[0].as_py() != base or offsets[-1].as_py() != base + n - 1:
        return batch
    stamps, epochs = pc.min_max(batch["timestamp"]), pc.min_max(batch["leader_epoch"])
    if stamps["min"] != stamps["max"] or epochs["min"] != epochs["max"]:
        return batch
    if not (np.diff(offsets.chunk(0).to_numpy()) == 1).all():  # dense (first and last alone do not say)
        return batch
    return DenseBatch(batch.drop_columns(list(_DENSE_COLUMNS)), base, batch["timestamp"][0], epochs["min"].as_py())


#: Batches of fewer rows are cached as they are: their three columns cost at most 1.3 MB, and every read of
#: a dense batch builds them again (the flush's read of the tail included). At 4,096, Arrow produce of
#: 10,000-record requests ran 1.40 M records/s against 1.60 M with whole batches (bench/produce_fetch.py
#: --only arrow, nine runs each, alternating); a request of a million tiny records keeps its 20 MB saving.
DENSE_MIN_ROWS = 65_536


def _cost(batch: "pa.Table | DenseBatch") -> int:
    if isinstance(batch, DenseBatch):
        return batch.rest.get_total_buffer_size() + CHUNK_OVERHEAD_BYTES
    return batch.get_total_buffer_size() + CHUNK_OVERHEAD_BYTES * max(batch.column(0).num_chunks, 1)


class TailCache:
    """The newest batches of one log, at most about ``max_bytes`` (0 = no cache).

    ``max_bytes`` counts each chunk's Arrow buffers plus :data:`CHUNK_OVERHEAD_BYTES`, so many tiny
    batches (one record per produce request) cannot hold more memory than the budget says. Every
    :data:`MERGE_RUN` small batches at the newest end are merged into one chunk.

    Not locked itself: the log calls :meth:`add` and :meth:`clear` under its state lock; readers use
    :meth:`view` (built when the cache changed since the last one).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bases: list[int] = []
        self._chunks: list[pa.Table] = []
        self._costs: list[int] = []
        self._start = 0  # chunks before it were evicted (compacted away now and then)
        self._small_run = 0
        self._view: CacheView | None = CacheView()
        self._bytes = 0

    def view(self) -> CacheView:
        """The cache as it is now (immutable)."""
        if self._view is None:
            self._view = CacheView(tuple(self._bases[self._start:]), tuple(self._chunks[self._start:]))
        return self._view

    @property
    def nbytes(self) -> int:
        """Bytes charged (Arrow buffers plus the per-chunk overhead)."""
        return self._bytes

    def add(self, base: int, batch: pa.Table) -> None:
        """Add a just-appended batch covering the offsets from ``base`` (it continues the cached offsets;
        a replicated batch with gaps may start later than ``base`` or hold no row).

        Evicts the oldest batches while over budget; the newest batch stays even if larger than it.
        """
        if self.max_bytes <= 0:
            return
        batch = dense_batch(base, batch)
        self._bases.append(base)
        self._chunks.append(batch)
        cost = _cost(batch)
        self._costs.append(cost)
        self._bytes += cost
        self._small_run = self._small_run + 1 if batch.nbytes < SMALL_CHUNK_BYTES else 0
        if self._small_run >= MERGE_RUN:
            self._merge_tail(MERGE_RUN)
        while len(self._chunks) - self._start > 1 and self._bytes > self.max_bytes:
            self._bytes -= self._costs[self._start]
            self._chunks[self._start] = None  # type: ignore[call-overload]  # free it now
            self._start += 1
        if self._start > 1024 and self._start * 2 > len(self._chunks):
            del self._bases[:self._start], self._chunks[:self._start], self._costs[:self._start]
            self._start = 0
        self._view = None

    def _merge_tail(self, n: int) -> None:
        n = min(n, len(self._chunks) - self._start)
        merged = pa.concat_tables([c.table() if isinstance(c, DenseBatch) else c for c in self._chunks[-n:]]).combine_chunks()
        base = self._bases[-n]
        self._bytes -= sum(self._costs[-n:])
        del self._bases[-n:], self._chunks[-n:], self._costs[-n:]
        self._bases.append(base)
        self._chunks.append(merged)
        cost = _cost(merged)
        self._costs.append(cost)
        self._bytes += cost
        self._small_run = 1 if merged.nbytes < SMALL_CHUNK_BYTES else 0

    def clear(self) -> None:
        """Drop everything (recovery, truncation)."""
        self._bases, self._chunks, self._costs = [], [], []
        self._start = self._small_run = self._bytes = 0
        self._view = CacheView()
