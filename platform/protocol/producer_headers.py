"""The idempotent producer's request headers: the wire vocabulary shared by the gateway and its clients.

An idempotent produce request (any produce route: v2 binary/JSON to a topic or a partition, Arrow, v3
records) carries three headers, Kafka's record batch fields ``producerId``, ``producerEpoch`` and
``baseSequence`` (KIP-98):

- ``X-Lakelog-Producer-Id``: the id ``POST /v3/clusters/{cluster_id}/producers`` handed out (int64 >= 0);
- ``X-Lakelog-Producer-Epoch``: its epoch (0 to 32767);
- ``X-Lakelog-Sequence``: the producer's number for the request, 0, 1, 2, ... (0 to 2**31 - 1); a retry
  of a request repeats its number, whatever broker it goes to.

A request has all three or none (none: produced as before, REST Proxy's behaviour).

A transactional producer adds ``X-Lakelog-Transactional-Id`` (its ``transactional.id``, from
``POST /v3/clusters/{cluster_id}/producers`` with a ``transactional_id``): the request's records join the
producer's open transaction, which begins with its first such request (Kafka's AddPartitionsToTxn is
implicit: the partition leader adds the partition to the transaction before it appends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakelog.protocol.errors import InvalidProducerHeadersError

PRODUCER_ID_HEADER = "X-Lakelog-Producer-Id"
PRODUCER_EPOCH_HEADER = "X-Lakelog-Producer-Epoch"
SEQUENCE_HEADER = "X-Lakelog-Sequence"
TRANSACTIONAL_ID_HEADER = "X-Lakelog-Transactional-Id"

#: Kafka's field widths: producer id int64, producer epoch int16, sequence int32.
MAX_PRODUCER_ID = 2**63 - 1
MAX_PRODUCER_EPOCH = 2**15 - 1
MAX_SEQUENCE = 2**31 - 1


@dataclass(frozen=True)
class ProducerBatch:
    """Who sent a produce request and its number: the values stored in the log's producer columns (and,
    for a transactional request, its transaction).

    Attributes:
        producer_id: int64 >= 0. producer_epoch: 0 to 32767. sequence: the request's number, 0 to 2**31 - 1.
        transactional_id: the transactional producer's id when the request belongs to its transaction.
            Default: None (an idempotent request).
    """

    producer_id: int
    producer_epoch: int
    sequence: int
    transactional_id: str | None = None

    def headers(self) -> dict[str, str]:
        """The request headers that carry this batch (three, four with a transactional id)."""
        headers = {PRODUCER_ID_HEADER: str(self.producer_id), PRODUCER_EPOCH_HEADER: str(self.producer_epoch),
                   SEQUENCE_HEADER: str(self.sequence)}
        if self.transactional_id is not None:
            headers[TRANSACTIONAL_ID_HEADER] = self.transactional_id
        return headers


def producer_batch_from_headers(headers: Mapping[str, str]) -> ProducerBatch | None:
    """The :class:`ProducerBatch` of a request's headers (case-insensitive names), or None without them.

    Raises:
        InvalidProducerHeadersError: one or two of the three headers, a value that is not a decimal
            integer, or one out of its range; a transactional id without them, or an empty one.
    """
    names = (PRODUCER_ID_HEADER, PRODUCER_EPOCH_HEADER, SEQUENCE_HEADER)
    raw = [headers.get(n, headers.get(n.lower())) for n in names]
    transactional_id = headers.get(TRANSACTIONAL_ID_HEADER, headers.get(TRANSACTIONAL_ID_HEADER.lower()))
    if all(v is None for v in raw):
        if transactional_id is not None:
            raise InvalidProducerHeadersError(
                f"Header {TRANSACTIONAL_ID_HEADER} needs the idempotence headers {', '.join(names)} too: send the "
                "producer id and epoch of POST /v3/clusters/{cluster_id}/producers with the transactional_id, "
                "and the request's sequence.")
        return None
    missing = [n for n, v in zip(names, raw) if v is None]
    if missing:
        raise InvalidProducerHeadersError(
            f"An idempotent produce request needs all of {', '.join(names)}; {', '.join(missing)} missing. "
            f"Send all three (from POST /v3/clusters/{{cluster_id}}/producers) or none.")
    values = []
    for name, value, high in zip(names, raw, (MAX_PRODUCER_ID, MAX_PRODUCER_EPOCH, MAX_SEQUENCE)):
        try:
            v = int(value.strip())
        except ValueError:
            v = -1
        if not 0 <= v <= high:
            raise InvalidProducerHeadersError(
                f"Header {name}: {value!r} is not an integer from 0 to {high}.")
        values.append(v)
    if transactional_id is not None and not transactional_id.strip():
        raise InvalidProducerHeadersError(f"Header {TRANSACTIONAL_ID_HEADER} is empty: name the transactional id.")
    return ProducerBatch(*values, transactional_id=transactional_id)
