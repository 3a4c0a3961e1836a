"""Give the memory of a large request back to the system once it is answered.

A produce request of a few hundred MB leaves its freed memory with the allocators that held it: Arrow's
memory pool (jemalloc or mimalloc in pyarrow's wheels) keeps freed pages for reuse, and glibc's malloc
(numpy's buffers, Python's large objects) keeps freed heap memory in its arenas. The broker's RSS then
stays at the request's peak. :func:`release_unused_memory` asks both to return what they hold unused:
:meth:`pyarrow.MemoryPool.release_unused` and glibc's ``malloc_trim(0)`` (nothing where the C library
is not glibc). ``bench/produce_memory.py`` prints the RSS after a request beside its peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import pyarrow as pa

#: Requests whose body had at least this many bytes release the memory they used once answered.
RELEASE_MIN_BYTES = 1 << 20


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
