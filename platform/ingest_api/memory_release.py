"""Give the memory of a large request back to the system once it is answered.

A produce request of a few hundred MB leaves its freed memory with the allocators that held it: Arrow's
memory pool (jemalloc or mimalloc in pyarrow's wheels) keeps freed pages for reuse, and glibc's malloc
(numpy's buffers, Python's large objects) keeps freed heap memory in its arenas. The broker's RSS then
stays at the request's peak. :func:`release_unused_memory` asks both to return what they hold unused:
:meth:`pyarrow.MemoryPool.release_unused` and glibc's ``malloc_trim(0)`` (nothing where the C library
is not glibc). ``bench/produce_memory.py`` prints the RSS after a request beside its peak.

Releasing costs: ``malloc_trim`` walks the heap and the next request faults the pages back in, which took
15-20% of the throughput of a stream of 1 to 10 MB produce requests (``bench/produce_fetch.py``) when
every large request released. :class:`MemoryReleaser` releases once a burst of large requests is over,
:data:`RELEASE_QUIET_MS` after the last one was answered.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import time

import pyarrow as pa

#: Requests whose body had at least this many bytes release the memory they used once answered.
RELEASE_MIN_BYTES = 1 << 20
#: A JSON-format body of at least this many bytes releases its decode's freed temporaries (numpy's, in the
#: decoding thread's malloc arena: about 10 MB for 1,000,000 tiny records) before its records are appended,
#: so they do not add to the append's memory. Its decode takes seconds; the release, milliseconds.
DECODE_RELEASE_MIN_BYTES = 8 << 20
#: A release runs once no large request was answered for this long.
RELEASE_QUIET_MS = 500


def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_unused_memory() -> None:
    """Return the memory Arrow's pool and glibc's malloc hold unused to the system (blocks for a few ms;
    safe while other threads allocate)."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)


class MemoryReleaser:
    """Runs :func:`release_unused_memory` once a burst of large requests is over: :meth:`request_done`
    after each large request is answered (or failed); the release runs in a worker thread ``quiet_ms``
    after the last of them, never while they keep coming. One per app, used from its event loop.

    Args:
        quiet_ms: how long no large request must have been answered before the release runs.
            Default: :data:`RELEASE_QUIET_MS`.
    """

    def __init__(self, *, quiet_ms: int = RELEASE_QUIET_MS) -> None:
        self.quiet_s = quiet_ms / 1000
        self._last_done = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._release: asyncio.Future | None = None
        #: releases run so far (tests and the bench read it)
        self.releases = 0

    async def request_done(self) -> None:
        """Note that a large request was answered (or failed): the release waits ``quiet_ms`` from now."""
        self._last_done = time.monotonic()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.quiet_s, self._check)

    def _check(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        wait_s = self._last_done + self.quiet_s - time.monotonic()
        if wait_s > 0 or (self._release is not None and not self._release.done()):
            self._timer = loop.call_later(max(wait_s, self.quiet_s / 10), self._check)
            return
        self.releases += 1
        self._release = loop.run_in_executor(None, release_unused_memory)
