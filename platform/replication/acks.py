"""Producer ``acks``: how many replicas must have a batch before the produce is answered.

Kafka's producer config ``acks`` (see the Kafka producer configs doc), per request here: the query
parameter ``acks`` or the header ``X-Lakelog-Acks``; default ``all``.

- ``0``: the leader queues the batch and answers at once; offsets are -1 and errors are not reported.
- ``1``: answered once the leader committed the batch to its own Delta table. A leader that dies
  before a follower copied the batch loses it.
- ``all`` (or ``-1``): refused before anything is written when the ISR is smaller than the topic's
  ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS); else answered once the high watermark passed the batch,
  i.e. every in-sync replica has it, within ``request.timeout.ms``.
"""

from __future__ import annotations

from typing import Literal

from lakelog.replication.errors import InvalidRequiredAcksError

#: The producer's ``acks`` modes.
Acks = Literal["0", "1", "all"]

ACKS_HEADER = "X-Lakelog-Acks"
DEFAULT_ACKS: Acks = "all"


def parse_acks(value: str | None) -> Acks:
    """``"0"``, ``"1"`` or ``"all"`` from a request's ``acks`` (None = the default, ``all``; ``-1`` = ``all``).

    Raises:
        InvalidRequiredAcksError: any other value.
    """
    if value is None or value == "":
        return DEFAULT_ACKS
    v = value.strip().lower()
    if v in ("all", "-1"):
        return "all"
    if v in ("0", "1"):
        return v
    raise InvalidRequiredAcksError(f"acks must be 0, 1 or all (or -1), not {value!r}.")
