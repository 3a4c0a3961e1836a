"""The tail cache of a partition log: its newest appended batches, in memory, for tail fetches.

Consumers that keep up and followers fetch the newest records; those are served from the Arrow batches
the log just committed, without opening a data file. The cache holds whole batches, contiguous in
offsets, oldest first, within a byte budget (``log.tail.cache.max.bytes``): adding a batch evicts the
oldest ones while the cache is over budget, but always keeps the newest.

Reads take a :class:`CacheView`, an immutable picture of the cache (the cache replaces its view on every
change, so a reader never locks and never sees a half-made change).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

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
    chunks: tuple[pa.Table, ...] = ()

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
                cut = budget < piece.nbytes
                if cut:
                    rows = max(1, int(piece.num_rows * budget / max(piece.nbytes, 1)))
                    piece = piece.slice(0, rows)
                out.append(piece)
                budget -= piece.nbytes
                offset = piece["offset"][-1].as_py() + 1
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
    if chunk["offset"][-1].as_py() - base == n - 1:
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


def _cost(batch: pa.Table) -> int:
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
        merged = pa.concat_tables(self._chunks[-n:]).combine_chunks()
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
