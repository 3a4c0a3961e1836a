"""Cluster-unique producer ids, handed out in blocks reserved in ZooKeeper: the blocks and their znode.

An idempotent producer asks any broker for a producer id (``POST /v3/clusters/{cluster_id}/producers``,
Kafka's InitProducerId). Each broker reserves a block of :data:`PRODUCER_ID_BLOCK_SIZE` ids at a time
in the znode ``/lakelog/latest_producer_id_block`` and hands them out one by one; when its block is used
up it reserves the next one. The znode holds the latest reserved block, as Kafka's
``ProducerIdBlockZNode`` writes it (UTF-8 JSON, ``block_start`` and ``block_end`` as decimal strings,
both inclusive)::

    {"version": 1, "broker": 0, "block_start": "1000", "block_end": "1999"}

The broker's manager that reserves blocks in ZooKeeper and hands ids out is
:class:`lakelog.coordinators.producer_id_manager.ProducerIdManager` (above replication, as Kafka's sits
beside its transaction coordinator); this module is what it writes and what layers below it name.

Kafka sources: ``kafka.zk.ProducerIdBlockZNode``, ``ProducerIdsBlock`` (``PRODUCER_ID_BLOCK_SIZE``),
``ProducerIdAndEpoch``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["BLOCK_ZNODE_VERSION", "PRODUCER_ID_BLOCK_PATH", "PRODUCER_ID_BLOCK_SIZE", "ProducerIdAndEpoch",
           "ProducerIdBlock"]

#: The znode of the latest reserved block (under ``/lakelog``, the root of :mod:`lakelog.replication.metadata`).
PRODUCER_ID_BLOCK_PATH = "/lakelog/latest_producer_id_block"
#: Ids per block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000
#: The znode's format version (Kafka's ``ProducerIdBlockZNode.CurrentVersion``).
BLOCK_ZNODE_VERSION = 1


@dataclass(frozen=True)
class ProducerIdBlock:
    """A block of producer ids reserved by one broker (Kafka's ``ProducerIdsBlock``).

    Attributes:
        broker: the broker that reserved it. first_id, last_id: the block's ids, both inclusive (int64 >= 0).
    """

    broker: int
    first_id: int
    last_id: int

    def to_json(self) -> bytes:
        """The znode's data, as Kafka writes it (ids as decimal strings)."""
        return json.dumps({"version": BLOCK_ZNODE_VERSION, "broker": self.broker,
                           "block_start": str(self.first_id), "block_end": str(self.last_id)}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "ProducerIdBlock":
        """Parse the znode's data (ids as strings, as Kafka writes them, or as numbers).

        Raises:
            ValueError: not such a JSON object.
        """
        try:
            body = json.loads(data)
            return cls(int(body["broker"]), int(body["block_start"]), int(body["block_end"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{PRODUCER_ID_BLOCK_PATH} holds no producer id block: {data[:200]!r} ({e})") from None


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    """What InitProducerId answers (Kafka's ``ProducerIdAndEpoch``): an id (int64 >= 0) and its epoch
    (0 to 32767; 0 for a new idempotent producer)."""

    producer_id: int
    producer_epoch: int
