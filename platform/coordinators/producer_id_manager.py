"""This broker's producer ids, handed out in blocks reserved in ZooKeeper (Kafka's ``ZkProducerIdManager``).

An idempotent producer asks any broker for a producer id (``POST /v3/clusters/{cluster_id}/producers``,
Kafka's InitProducerId); a transactional producer's new id comes from here through its transaction
coordinator. Each broker reserves a block of :data:`~lakelog.producers.producer_ids.PRODUCER_ID_BLOCK_SIZE`
ids at a time in the znode ``/lakelog/latest_producer_id_block`` (:mod:`lakelog.producers.producer_ids`:
the block, its JSON as Kafka's ``ProducerIdBlockZNode`` writes it) and hands them out one by one; when its
block is used up it reserves the next one.

A block is reserved with a version-checked ``set`` of the znode (created with the first block when
missing); a broker that loses the race (``BadVersionError``, ``NodeExistsError``) reads the new latest
block and tries the block after it, so two brokers never hold the same block. Ids reserved by a broker
that stops unused are never handed out (as in Kafka).

Kafka sources: ``kafka.coordinator.transaction.ProducerIdManager`` (``ZkProducerIdManager``,
``getNewProducerIdBlock``), and ``TransactionCoordinator.handleInitProducerId`` for
:meth:`ProducerIdManager.init_producer_id`.
"""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from lakelog.producers.errors import ProducerIdsExhaustedError, TransactionsNotSupportedError
from lakelog.producers.producer_ids import (
    PRODUCER_ID_BLOCK_PATH,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdAndEpoch,
    ProducerIdBlock,
)
from lakelog.protocol.producer_headers import MAX_PRODUCER_ID
from lakelog.replication.errors import ZooKeeperUnavailableError

log = logging.getLogger(__name__)

__all__ = ["ProducerIdManager"]

#: kazoo errors that mean "ZooKeeper is not reachable right now".
_ZOOKEEPER_UNAVAILABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, KazooTimeoutError)


class ProducerIdManager:
    """Hands out this broker's producer ids (Kafka's ``ZkProducerIdManager``).

    Args:
        zk: a started kazoo client on the cluster's chroot (the broker's).
        broker_id: ``broker.id``, written into the blocks it reserves.
        block_size: ids per block. Default: 1000 (Kafka's).

    Thread-safe. Every method that may touch ZooKeeper blocks (kazoo calls): an event loop runs it in a
    worker thread (``asyncio.to_thread``). No ZooKeeper I/O happens before the first call.
    """

    def __init__(self, zk: KazooClient, *, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, not {block_size}")
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        #: the highest ``block_end`` seen in ZooKeeper (ours or read), -1 before any
        self._latest_end = -1

    def init_producer_id(self, *, transactional_id: str | None = None) -> ProducerIdAndEpoch:
        """Kafka's InitProducerId for an idempotent producer: a new producer id with epoch 0.

        Args:
            transactional_id: must be None (a transactional producer asks the transaction coordinator).

        Raises:
            TransactionsNotSupportedError: ``transactional_id`` given (400 / 40010).
            ZooKeeperUnavailableError: ZooKeeper unreachable while a new block was reserved (503 / 50304,
                retriable).
        """
        if transactional_id is not None:
            raise TransactionsNotSupportedError(
                f"transactional_id {transactional_id!r}: the producer id manager hands out ids of idempotent "
                "producers only; ask the transaction coordinator of the transactional id.")
        return ProducerIdAndEpoch(self.generate_producer_id(), 0)

    def generate_producer_id(self) -> int:
        """The next id of this broker's block (int64 >= 0), unique cluster-wide; a new block is reserved
        in ZooKeeper first when the current one is used up (or on the first call).

        Raises:
            ZooKeeperUnavailableError: ZooKeeper unreachable (retriable).
            ProducerIdsExhaustedError: no block left below 2**63 - 1.
        """
        with self._lock:
            if self._block is None or self._next_id > self._block.last_id:
                self._block = self._reserve_block()
                self._next_id = self._block.first_id
            self._next_id += 1
            return self._next_id - 1

    def is_allocated(self, producer_id: int) -> bool:
        """Whether this cluster may have handed out ``producer_id``: ``0 <= producer_id <= block_end`` of
        the latest block reserved in ZooKeeper (``block_end`` is inclusive, as Kafka's). ZooKeeper is read
        again only when the id is beyond the latest block end this manager knows.

        Raises:
            ZooKeeperUnavailableError: ZooKeeper unreachable (retriable).
        """
        if producer_id < 0:
            return False
        if producer_id <= self._latest_end:
            return True
        try:
            data, _ = self.zk.get(PRODUCER_ID_BLOCK_PATH)
        except NoNodeError:
            return False
        except _ZOOKEEPER_UNAVAILABLE as e:
            raise ZooKeeperUnavailableError(
                f"ZooKeeper unreachable while reading {PRODUCER_ID_BLOCK_PATH} ({type(e).__name__}); retry.") from e
        if not data:
            return False
        end = ProducerIdBlock.from_json(data).last_id
        with self._lock:
            self._latest_end = max(self._latest_end, end)
        return producer_id <= end

    def _reserve_block(self) -> ProducerIdBlock:
        """Reserve the block after the latest one in ZooKeeper (Kafka's ``getNewProducerIdBlock``): read
        the znode, write the next block version-checked (create the znode with block 0 when missing),
        again after a lost race. Called under the lock."""
        try:
            while True:
                try:
                    data, stat = self.zk.get(PRODUCER_ID_BLOCK_PATH)
                except NoNodeError:
                    data, stat = None, None
                if data:
                    current = ProducerIdBlock.from_json(data)
                    if current.last_id > MAX_PRODUCER_ID - self.block_size:
                        raise ProducerIdsExhaustedError(
                            f"Have exhausted all producer ids: the latest block ends at {current.last_id}.")
                    first = current.last_id + 1
                else:
                    first = 0
                block = ProducerIdBlock(self.broker_id, first, first + self.block_size - 1)
                try:
                    if stat is None:
                        self.zk.create(PRODUCER_ID_BLOCK_PATH, block.to_json(), makepath=True)
                    else:
                        self.zk.set(PRODUCER_ID_BLOCK_PATH, block.to_json(), version=stat.version)
                except (BadVersionError, NodeExistsError):
                    log.debug("producer id block %d-%d taken by another broker: reading the latest again",
                              block.first_id, block.last_id)
                    continue
                self._latest_end = max(self._latest_end, block.last_id)
                log.info("broker %d reserved producer ids %d to %d", self.broker_id, block.first_id, block.last_id)
                return block
        except _ZOOKEEPER_UNAVAILABLE as e:
            raise ZooKeeperUnavailableError(
                f"ZooKeeper unreachable while reserving a producer id block ({type(e).__name__}); retry.") from e
