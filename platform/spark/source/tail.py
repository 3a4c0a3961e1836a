"""The offsets not in a partition's Delta table yet, read through the leader's Arrow fetch.

A partition log has two tiers (DESIGN.md, "Storage"): the Delta table holds the offsets below the
*lake end offset*; the offsets from there up to the high watermark (HW) are in the leader's segment
tail until its flusher commits them (every ``lake.commit.interval.ms``). With ``lakelog.read.tail=true``
the source reads that rest with the gateway's Arrow fetch (``GET /topics/{t}/partitions/{p}/records``
with ``Accept: application/vnd.apache.arrow.stream``; any broker forwards or redirects to the leader,
which serves any offset from its tail or its Delta table):

- :func:`fetch_offset_range` (executors): the records ``start <= offset < end`` of one partition,
  paging through fetches of about ``max_bytes`` each until ``end``; never a record at or above
  ``end`` (which the driver planned at or below the HW);
- :func:`tail_offset_for_timestamp` (driver): the first offset of the tail whose timestamp is at or
  after a time (``startingTimestamp`` & co. when the Delta table has no record that recent).

:class:`TailFetch` carries what an executor needs for it (the gateways, the page size, retries);
:func:`tail_fetch` makes it from a read's options.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, TypeVar

import numpy as np
import pyarrow as pa

from lakelog.log_tables.fetch import first_offset_at_or_after
from lakelog.log_tables.reader import DataLoss
from lakelog.client import BearerToken
from lakelog.protocol.errors import RemoteError
from lakelog.protocol.fetch_requests import IsolationLevel
from lakelog.client import LakelogClient
from lakelog.protocol.log_info import PartitionLogInfo
from lakelog.spark.source.options import SourceOptions

T = TypeVar("T")

log = logging.getLogger(__name__)

__all__ = ["OFFSET_OUT_OF_RANGE", "TAIL_FETCH_MAX_BYTES", "TailFetch", "fetch_offset_range",
           "tail_fetch", "tail_offset_for_timestamp"]

#: Bytes asked for per Arrow fetch (the fetch's ``max_bytes``, a soft limit: at least one record comes back).
TAIL_FETCH_MAX_BYTES = 16 * 1024 * 1024

#: REST error code of a fetch below the log start offset or above the HW (``OffsetOutOfRangeError``).
OFFSET_OUT_OF_RANGE = 42226


@dataclass(frozen=True)
class TailFetch:
    """How executors fetch the offsets of a range that are not in the Delta table (picklable).

    Attributes:
        bootstrap_servers: ``lakelog.bootstrap.servers``, comma list of gateway ``host:port`` or URLs.
        max_bytes: bytes per fetch page (> 0). Default: :data:`TAIL_FETCH_MAX_BYTES` (16 MiB).
        retries: retries of a fetch that failed with a retriable error (no leader during a failover,
            an unreachable gateway). Default: 3 (the source's ``fetchOffset.numRetries``).
        retry_interval_ms: ms between those retries. Default: 1000 (``fetchOffset.retryIntervalMs``).
        isolation_level: the fetches' Kafka ``isolation.level`` (``isolation.level`` option):
            read_committed drops aborted records. Default: read_uncommitted.
        auth: the read's ``lakelog.auth.username`` / ``lakelog.auth.password``, sent as HTTP Basic
            credentials, or its ``lakelog.auth.token`` (a bearer token). Default: None.
        tls: the read's ``lakelog.ssl.*`` files as LakelogClient keyword arguments (the same paths on every
            executor). Default: none.
    """

    bootstrap_servers: str
    max_bytes: int = TAIL_FETCH_MAX_BYTES
    retries: int = 3
    retry_interval_ms: int = 1000
    isolation_level: IsolationLevel = "read_uncommitted"
    auth: tuple[str, str] | BearerToken | None = field(default=None, repr=False)  # never in a log line
    tls: dict[str, str] = field(default_factory=dict)

    def client(self) -> LakelogClient:
        """A new gateway client (the caller closes it)."""
        return LakelogClient(self.bootstrap_servers, auth=self.auth, **self.tls)


def tail_fetch(options: SourceOptions) -> TailFetch:
    """How a read fetches offsets past the lake end offset: its gateways and retries
    (``lakelog.bootstrap.servers``, ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``), its
    ``isolation.level``, pages of :data:`TAIL_FETCH_MAX_BYTES`."""
    return TailFetch(options.bootstrap_servers, retries=options.fetch_offset_retries,
                     retry_interval_ms=options.fetch_offset_retry_interval_ms,
                     isolation_level=options.isolation_level, auth=options.auth, tls=options.tls)


def retry_remote(call: Callable[[], T], *, retries: int, retry_interval_ms: int, what: str) -> T:
    """``call()``, retried ``retries`` times (``retry_interval_ms`` apart) on retriable gateway errors and
    unreachable gateways (``what`` names the gateway in the warning).

    Raises:
        RemoteError: not retriable, or still there after the retries; ConnectionError: likewise.
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except (RemoteError, ConnectionError) as e:
            retriable = isinstance(e, ConnectionError) or e.retriable
            if not retriable or attempt == retries:
                raise
            log.warning("request to %s failed (%s); retrying", what, e)
            time.sleep(retry_interval_ms / 1000)
    raise AssertionError("unreachable")


def _retrying(fetch: TailFetch, call: Callable[[], T]) -> T:
    """:func:`retry_remote` with the fetch's retry settings."""
    return retry_remote(call, retries=fetch.retries, retry_interval_ms=fetch.retry_interval_ms,
                        what=str(fetch.bootstrap_servers))


def _offsets(table: pa.Table) -> np.ndarray:
    """The ``offset`` column as int64 numpy (ascending, as the fetch returns records in offset order)."""
    return table.column("offset").to_numpy().astype(np.int64, copy=False)


def fetch_offset_range(client: LakelogClient, fetch: TailFetch, *, topic: str, partition: int, table_uri: str,
                       start: int, end: int, on_data_loss: Callable[[DataLoss], None]) -> Iterator[pa.Table]:
    """The records ``start <= offset < end`` of a partition, from its leader's Arrow fetch, in offset order.

    Fetches from ``start`` and then from where each fetch ended (its ``X-Lakelog-Next-Offset``: one past
    the last offset returned, or past transaction markers and aborted records it skipped), about
    ``fetch.max_bytes`` per page, with the fetch's ``isolation_level``, until ``end``. Records at or above
    ``end`` are cut off; gaps (compaction, aborted transactions) are skipped.

    Args:
        client: the gateway client to fetch with.
        fetch: page size and retries (:class:`TailFetch`).
        topic, partition: the partition.
        table_uri: the partition's table as planned (only to name it in a :class:`DataLoss`).
        start: first offset wanted (>= 0).
        end: exclusive end, at or below the HW the driver planned with (so committed then).
        on_data_loss: called with a :class:`~lakelog.log_tables.reader.DataLoss` when offsets of the
            range are gone: below the log start offset now (retention; reading goes on from there if it
            returns), or the log now ends below ``end`` (truncated after an unclean leader change; the
            read ends). Raise from it to stop.

    Yields:
        ``pyarrow.Table`` s with the fetch's columns ``offset`` (int64), ``timestamp``
        (``timestamp[ms, UTC]``), ``key``, ``value`` (binary), ``headers``, each non-empty, offsets
        strictly increasing across all of them, all in ``[start, end)``.

    Raises:
        lakelog.protocol.errors.RemoteError: a gateway error other than offset out of range, or a
            retriable one still there after ``fetch.retries`` retries; ConnectionError: no gateway.
    """
    offset = start
    out_of_range_rounds = 0  # out of range while within [log start, HW) again: a race, retried a few times
    while offset < end:
        try:
            fetched = _retrying(fetch, lambda: client.fetch_page(topic, partition, offset, max_bytes=fetch.max_bytes,
                                                                 form="arrow", isolation_level=fetch.isolation_level))
        except RemoteError as e:
            if e.error_code != OFFSET_OUT_OF_RANGE:
                raise
            bounds = _retrying(fetch, lambda: client.partition_offsets(topic, partition))
            log_start, hw = int(bounds["beginning_offset"]), int(bounds["end_offset"])
            if offset < log_start:
                on_data_loss(DataLoss(table_uri=table_uri, start=offset, end=min(end, log_start),
                                      log_start_offset=log_start))
                offset = log_start
                continue
            if offset < hw and out_of_range_rounds < fetch.retries:
                out_of_range_rounds += 1  # in range by now (the log moved meanwhile): fetch again
                continue
            on_data_loss(DataLoss(table_uri=table_uri, start=offset, end=end,
                                  log_start_offset=log_start, at_head=False))
            return
        page = fetched.records
        if page.num_rows == 0 and fetched.next_offset > offset:
            if fetched.next_offset >= end:
                return
            offset = fetched.next_offset  # only transaction markers (or aborted records) there: go on past them
            continue
        if page.num_rows == 0:
            # Nothing from `offset` below the leader's HW: either the log was truncated below `end`
            # (data loss), or compaction removed the records up to a HW at or past `end` (a gap).
            bounds = _retrying(fetch, lambda: client.partition_offsets(topic, partition))
            hw = int(bounds["end_offset"])
            if hw < end:
                on_data_loss(DataLoss(table_uri=table_uri, start=max(offset, hw), end=end,
                                      log_start_offset=int(bounds["beginning_offset"]), at_head=False))
            return
        offsets = _offsets(page)
        keep = int(np.searchsorted(offsets, end, side="left"))  # rows below `end`
        if keep:
            yield page.slice(0, keep)
        if keep < page.num_rows or fetched.next_offset >= end:
            return  # the page reaches `end`: done
        offset = fetched.next_offset


def tail_offset_for_timestamp(client: LakelogClient, fetch: TailFetch, state: PartitionLogInfo,
                              timestamp_ms: int) -> int | None:
    """The first offset in ``[lake end offset, HW)`` (read_committed: up to the LSO) whose record timestamp is
    >= ``timestamp_ms``.

    Pages through the leader's Arrow fetch of the partition's tail (``state`` says where it is: from
    ``max(lake_end_offset, log_start_offset)`` to ``high_watermark``, or ``last_stable_offset`` when
    ``fetch.isolation_level`` is read_committed), only the ``offset`` and ``timestamp`` of each record
    being compared.

    Returns:
        The offset, or None when no record of the tail is that recent (or the tail is empty).

    Raises:
        as :func:`fetch_offset_range`; offsets of the tail gone meanwhile are skipped.
    """
    start = max(state.lake_end_offset, state.log_start_offset)
    pages = fetch_offset_range(client, fetch, topic=state.topic, partition=state.partition,
                               table_uri=state.table_uri, start=start,
                               end=state.last_stable_offset if fetch.isolation_level == "read_committed"
                               else state.high_watermark,
                               on_data_loss=lambda loss: None)
    return first_offset_at_or_after(pages, timestamp_ms)
