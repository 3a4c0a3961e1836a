"""The fetch requests of :class:`~lakelog.protocol.http_client.LakelogClient` (a mixin), and the fetch
vocabulary shared by the gateway and its clients.

``GET /topics/{t}/partitions/{p}/records?offset=&max_bytes=&max_wait_ms=&isolation_level=`` answers the
records from ``offset`` (REST Proxy v2 JSON forms or an Arrow IPC stream) and, in headers, where the next
fetch starts (:data:`NEXT_OFFSET_HEADER`), the high watermark and the log start offset. The next offset is
usually the last record's offset + 1, but a fetch never returns transaction markers (control records) and
a read_committed fetch no aborted records: when the answer ends on such records, the next offset lies past
its last record (a commit marker ends most transactions), and a consumer that went on from the last record
would fetch the marker again and again (lag 1 forever). :meth:`FetchRequests.fetch_page` answers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import httpx
import orjson
import pyarrow as pa

from lakelog.protocol import media_types
from lakelog.protocol.arrow_ipc import read_arrow_ipc

__all__ = ["ISOLATION_LEVELS", "NEXT_OFFSET_HEADER", "FetchPage", "FetchRequests", "IsolationLevel",
           "check_isolation_level"]

#: Kafka's consumer ``isolation.level``: read_uncommitted (the default) reads below the high watermark,
#: open and aborted transactions included; read_committed below the last stable offset, no aborted records.
IsolationLevel = Literal["read_uncommitted", "read_committed"]
ISOLATION_LEVELS: tuple[str, ...] = get_args(IsolationLevel)

#: Response header of a fetch: the offset the next fetch of the partition starts at.
NEXT_OFFSET_HEADER = "X-Lakelog-Next-Offset"


def check_isolation_level(value: str, *, option: str = "isolation.level") -> IsolationLevel:
    """``value`` as an :data:`IsolationLevel` (exactly ``read_uncommitted`` or ``read_committed``, as Kafka).

    Raises:
        ValueError: any other value, naming ``option`` and the allowed values.
    """
    if value not in ISOLATION_LEVELS:
        raise ValueError(f"{option} must be read_uncommitted or read_committed (Kafka's isolation.level), "
                         f"got {value!r}.")
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class FetchPage:
    """One fetch answer.

    Attributes:
        records: a list of REST Proxy records (forms ``binary``, ``json``) or an Arrow table with ``offset``,
            ``timestamp`` (ms, UTC), ``key``, ``value``, ``headers`` (form ``arrow``), in offset order.
        next_offset: where the next fetch of the partition starts (past dropped transaction markers).
        high_watermark, log_start_offset: the partition's, as the leader answered them.
    """

    records: list[dict] | pa.Table
    next_offset: int
    high_watermark: int
    log_start_offset: int


class FetchRequests:
    """Fetch requests; mixed into :class:`~lakelog.protocol.http_client.LakelogClient`, which provides
    ``_request`` (one request, following a 421 to the leader, an error answer raised as the server's error
    class)."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def fetch_page(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1024 * 1024,
                   max_wait_ms: int = 0, form: Literal["binary", "json", "arrow"] = "binary",
                   isolation_level: IsolationLevel = "read_uncommitted") -> FetchPage:
        """Records of a partition from ``offset`` and where the next fetch starts (Kafka's fetch).

        Args:
            topic, partition, offset: what to read (offset >= 0).
            max_bytes: soft limit of the answer's bytes (at least one record comes back). Default: 1 MiB.
            max_wait_ms: long-poll up to this long when nothing is there. Default: 0.
            form: ``binary`` (base64 keys and values), ``json`` or ``arrow``.
            isolation_level: Kafka's ``isolation.level`` (see :data:`IsolationLevel`).

        Returns:
            A :class:`FetchPage`; ``next_offset`` is the answer's :data:`NEXT_OFFSET_HEADER`, else (an older
            gateway) the last record's offset + 1, else ``offset``.

        Raises:
            GatewayError: OffsetOutOfRangeError (42202) below the log start offset or past the high
            watermark, UnknownTopicError (40401), UnknownPartitionError, 40001 a bad parameter.
        """
        accept = {"binary": media_types.BINARY_V2, "json": media_types.JSON_V2, "arrow": media_types.ARROW_STREAM}
        resp = self._request("GET", f"/topics/{topic}/partitions/{partition}/records",
                             params={"offset": offset, "max_bytes": max_bytes, "max_wait_ms": max_wait_ms,
                                     "isolation_level": isolation_level}, headers={"Accept": accept[form]})
        records = read_arrow_ipc(resp.content) if form == "arrow" else orjson.loads(resp.content)
        nxt = resp.headers.get(NEXT_OFFSET_HEADER)
        if nxt is None:
            last = (records["offset"][-1].as_py() if records.num_rows else None) if form == "arrow" else (
                records[-1]["offset"] if records else None)
            nxt = offset if last is None else last + 1
        return FetchPage(records, int(nxt), int(resp.headers.get("X-Lakelog-High-Watermark", -1)),
                         int(resp.headers.get("X-Lakelog-Log-Start-Offset", -1)))

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1024 * 1024,
              max_wait_ms: int = 0, form: str = "binary",
              isolation_level: IsolationLevel = "read_uncommitted") -> list[dict]:
        """Fetch JSON-form records (``form`` = ``binary`` or ``json``); page with :meth:`fetch_page`, whose
        ``next_offset`` moves past transaction markers."""
        return self.fetch_page(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                               form="json" if form == "json" else "binary",
                               isolation_level=isolation_level).records  # type: ignore[return-value]

    def fetch_arrow(self, topic: str, partition: int, offset: int, *, max_bytes: int = 16 * 1024 * 1024,
                    max_wait_ms: int = 0, isolation_level: IsolationLevel = "read_uncommitted") -> pa.Table:
        """Fetch records as an Arrow table (``offset``, ``timestamp``, ``key``, ``value``, ``headers``); page
        with :meth:`fetch_page` (``form="arrow"``), whose ``next_offset`` moves past transaction markers."""
        return self.fetch_page(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                               form="arrow", isolation_level=isolation_level).records  # type: ignore[return-value]
