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

import pyarrow as pa

__all__ = ["CacheView", "TailCache"]


@dataclass(frozen=True)
class CacheView:
    """The cached batches at one moment: ``chunks[i]`` holds offsets ``bases[i]`` .. ``bases[i] + rows - 1``.

    Attributes:
        bases: first offset of each batch, ascending.
        chunks: the batches (log schema), contiguous in offsets.
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
        always makes progress); a piece that does not fit is cut to the rows that fit.

        Args:
            offset: first offset wanted; at least :attr:`first_offset`.
            upper: exclusive end offset.
            budget: Arrow bytes still wanted (> 0).
            out: list the slices (zero-copy) are appended to.

        Returns:
            ``(next offset, budget left)``.
        """
        bases, chunks = self.bases, self.chunks
        i = bisect.bisect_right(bases, offset) - 1
        while i < len(chunks) and offset < upper and budget > 0 and offset >= bases[i]:
            chunk, base = chunks[i], bases[i]
            lo, hi = offset - base, min(chunk.num_rows, upper - base)
            if hi > lo:
                piece = chunk.slice(lo, hi - lo)
                if budget < piece.nbytes:
                    rows = max(1, int(piece.num_rows * budget / max(piece.nbytes, 1)))
                    piece = piece.slice(0, rows)
                out.append(piece)
                budget -= piece.nbytes
                offset = base + lo + piece.num_rows
            i += 1
        return offset, budget


class TailCache:
    """The newest batches of one log, at most about ``max_bytes`` Arrow bytes (0 = no cache).

    Not locked itself: the log calls :meth:`add` and :meth:`clear` under its state lock; readers use
    :meth:`view`.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._view = CacheView()
        self._bytes = 0

    def view(self) -> CacheView:
        """The cache as it is now (immutable)."""
        return self._view

    @property
    def nbytes(self) -> int:
        """Arrow bytes held."""
        return self._bytes

    def add(self, base: int, batch: pa.Table) -> None:
        """Add a just-committed batch starting at offset ``base`` (it continues the cached offsets).

        Evicts the oldest batches while over budget; the newest batch stays even if larger than it.
        """
        if self.max_bytes <= 0:
            return
        bases, chunks = [*self._view.bases, base], [*self._view.chunks, batch]
        size = self._bytes + batch.nbytes
        drop = 0
        while len(chunks) - drop > 1 and size > self.max_bytes:
            size -= chunks[drop].nbytes
            drop += 1
        self._view = CacheView(tuple(bases[drop:]), tuple(chunks[drop:]))
        self._bytes = size

    def clear(self) -> None:
        """Drop everything (recovery, truncation)."""
        self._view = CacheView()
        self._bytes = 0
