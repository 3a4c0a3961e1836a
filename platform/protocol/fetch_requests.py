"""The vocabulary of fetch requests, shared by the gateway, the brokers' follower fetches and the clients.

``GET /topics/{t}/partitions/{p}/records?offset=&max_bytes=&max_wait_ms=&isolation_level=`` answers the
records from ``offset`` (REST Proxy v2 JSON forms or an Arrow IPC stream) and, in headers, where the next
fetch starts (:data:`NEXT_OFFSET_HEADER`), the high watermark and the log start offset. The next offset is
usually the last record's offset + 1, but a fetch never returns transaction markers (control records) and
a read_committed fetch no aborted records: when the answer ends on such records, the next offset lies past
its last record (a commit marker ends most transactions), and a consumer that went on from the last record
would fetch the marker again and again (lag 1 forever). The client's
:meth:`~lakelog.client.LakelogClient.fetch_page` answers it.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["ISOLATION_LEVELS", "NEXT_OFFSET_HEADER", "IsolationLevel", "check_isolation_level"]

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
