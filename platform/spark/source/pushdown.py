"""Filter pushdown of batch reads: which of Spark's filters prune the planned offset ranges and files.

Spark hands a batch reader the conjunction of the query's filters on the source's columns
(``DataSourceReader.pushFilters``, PySpark 4, only with ``spark.sql.python.filterPushdown.enabled=true``,
which :func:`lakelog.spark.source.register` sets). :func:`push_filters` sorts them:

- ``topic``, ``partition`` and ``offset`` compared with literals (``=``, ``IN``, ``<``, ``<=``, ``>``,
  ``>=``) are **exact**: the driver narrows the planned offset ranges with them
  (:meth:`PushedFilters.narrow`; a range's offsets are ``[start, end)`` per partition), so files
  holding only other offsets are never opened, and Spark does not evaluate them again. An ``offset``
  ``IN`` list that would cut a partition into more than :data:`MAX_OFFSET_INTERVALS` runs is pruned
  by its hull only and left to Spark.
- ``timestamp`` compared with a timestamp literal (``=``, ``<``, ``<=``, ``>``, ``>=``) is **partial**:
  timestamps are not monotonic in offsets (CreateTime), so tasks skip the Delta files and Parquet row
  groups whose ``timestamp`` statistics rule the bounds out and filter the rows they read
  (:attr:`PushedFilters.timestamps`, the tail fetched from the leader too), and Spark still evaluates
  these filters.
- every other filter (``key``, ``value``, ``NOT``, ``IS NULL``, ``STARTS WITH``, ...) goes back to Spark
  unchanged.

There is no column pruning to push: Spark 4.2's Python data source API gives a reader its full schema
and no required columns; the reader reads the columns of that schema only (``headers`` only with
``includeHeaders=true``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from pyspark.sql.datasource import (EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                    LessThanOrEqual)

from lakelog.spark.source.planning import OffsetRangePartition

__all__ = ["MAX_OFFSET_INTERVALS", "PushedFilters", "push_filters"]

#: At most this many disjoint offset runs per partition from ``offset IN (...)`` before pruning by the
#: hull only (each run is a Spark task).
MAX_OFFSET_INTERVALS = 64

_MIN, _MAX = -(2 ** 63), 2 ** 63 - 1
_ALL = ((_MIN, _MAX),)  # the unconstrained interval set: [lo, hi) pairs, sorted and disjoint

Intervals = tuple[tuple[int, int], ...]


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    """The intersection of two sorted, disjoint sets of ``[lo, hi)`` intervals."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _points(values: Iterable[int]) -> Intervals:
    """``{v, ...}`` as merged ``[v, v + 1)`` intervals."""
    out: list[list[int]] = []
    for v in sorted(set(values)):
        if out and out[-1][1] == v:
            out[-1][1] = v + 1
        else:
            out.append([v, v + 1])
    return tuple((lo, hi) for lo, hi in out)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_intervals(f: Filter) -> Intervals | None:
    """The ``[lo, hi)`` intervals of integers a comparison of a ``long``/``int`` column admits; None when
    ``f`` is not such a comparison with integer literals."""
    if isinstance(f, In):
        values = [v for v in f.value if v is not None]  # NULL matches nothing
        return _points(values) if all(_is_int(v) for v in values) else None
    v = getattr(f, "value", None)
    if not _is_int(v):
        return None
    if isinstance(f, EqualTo):
        return ((v, v + 1),)
    if isinstance(f, GreaterThan):
        return ((v + 1, _MAX),)
    if isinstance(f, GreaterThanOrEqual):
        return ((v, _MAX),)
    if isinstance(f, LessThan):
        return ((_MIN, v),)
    if isinstance(f, LessThanOrEqual):
        return ((_MIN, v + 1),)
    return None


def _us(value: object) -> int | None:
    """A timezone-aware ``datetime`` as µs since the epoch; None for anything else (naive datetimes are
    ``TIMESTAMP_NTZ`` values, which Spark only compares with a cast column, never pushed here)."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamp_bounds(f: Filter) -> tuple[int | None, int | None] | None:
    """``(low_us, high_us)`` (inclusive) a comparison of ``timestamp`` with a literal admits, or None."""
    if isinstance(f, In) or not hasattr(f, "value"):
        return None
    v = _us(f.value)
    if v is None:
        return None
    if isinstance(f, EqualTo):
        return v, v
    if isinstance(f, GreaterThan):
        return v + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return v, None
    if isinstance(f, LessThan):
        return None, v - 1
    if isinstance(f, LessThanOrEqual):
        return None, v
    return None


@dataclass(frozen=True)
class PushedFilters:
    """What a batch read's pushed-down filters admit (picklable; all constraints ANDed).

    Attributes:
        topics: the topics admitted, or None for any.
        partitions: ``[lo, hi)`` intervals of partition numbers admitted (sorted, disjoint).
        offsets: ``[lo, hi)`` intervals of offsets admitted, in every partition (sorted, disjoint).
        timestamps: ``(low_us, high_us)``, µs since the epoch, inclusive (None = unbounded), or None
            when no ``timestamp`` filter was pushed: tasks read only records within them.
    """

    topics: frozenset[str] | None = None
    partitions: Intervals = _ALL
    offsets: Intervals = _ALL
    timestamps: tuple[int | None, int | None] | None = None

    def narrow(self, ranges: Sequence[OffsetRangePartition]) -> list[OffsetRangePartition]:
        """``ranges`` cut to the topics, partitions and offsets admitted: ranges of other partitions
        dropped, each remaining range intersected with :attr:`offsets` (a range may become several,
        each keeping its ``lake_end_offset``), empty ones dropped."""
        out = []
        for r in ranges:
            if self.topics is not None and r.topic not in self.topics:
                continue
            if not _intersect(self.partitions, ((r.partition, r.partition + 1),)):
                continue
            for lo, hi in _intersect(self.offsets, ((r.start, r.end),)):
                out.append(replace(r, start=lo, end=hi))
        return out


def push_filters(filters: Sequence[Filter]) -> tuple[PushedFilters, list[Filter]]:
    """Sort Spark's pushed filters (their conjunction) into what the read applies and what Spark must.

    Args:
        filters: ``pyspark.sql.datasource`` filters of the source's columns (``attribute`` a column path
            like ``("offset",)``).

    Returns:
        ``(pushed, rest)``: :class:`PushedFilters`, and the filters of ``filters`` (the same objects, in
        order) Spark must still evaluate: the ``timestamp`` ones (applied partially here), an ``offset IN``
        too large to plan exactly, and all that are not pushed.
    """
    topics: frozenset[str] | None = None
    partitions, offsets = _ALL, _ALL
    low, high, has_timestamps = None, None, False
    rest: list[Filter] = []
    offset_filters: list[Filter] = []
    for f in filters:
        column = f.attribute[0] if len(getattr(f, "attribute", ())) == 1 else None
        if column == "topic" and isinstance(f, (EqualTo, In)):
            values = f.value if isinstance(f, In) else (f.value,)
            if all(isinstance(v, str) or v is None for v in values):
                admitted = frozenset(v for v in values if v is not None)
                topics = admitted if topics is None else topics & admitted
                continue
        elif column in ("partition", "offset"):
            intervals = _int_intervals(f)
            if intervals is not None:
                if column == "partition":
                    partitions = _intersect(partitions, intervals)
                else:
                    offsets = _intersect(offsets, intervals)
                    offset_filters.append(f)
                continue
        elif column == "timestamp":
            bounds = _timestamp_bounds(f)
            if bounds is not None:
                has_timestamps = True
                if bounds[0] is not None:
                    low = bounds[0] if low is None else max(low, bounds[0])
                if bounds[1] is not None:
                    high = bounds[1] if high is None else min(high, bounds[1])
        rest.append(f)  # not pushed, or (timestamp) pushed partially
    if len(offsets) > MAX_OFFSET_INTERVALS:
        offsets = ((offsets[0][0], offsets[-1][1]),)  # prune by the hull; Spark picks the offsets
        rest.extend(offset_filters)
        order = {id(f): i for i, f in enumerate(filters)}
        rest.sort(key=lambda f: order[id(f)])
    pushed = PushedFilters(topics=topics, partitions=partitions, offsets=offsets,
                           timestamps=(low, high) if has_timestamps else None)
    return pushed, rest
