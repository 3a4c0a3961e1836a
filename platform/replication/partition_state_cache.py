"""Partition states (leader, leader epoch, ISR) kept in memory by ZooKeeper watches, for views of many
partitions.

Kafka's brokers answer metadata for every partition from their ``MetadataCache``; lakelog's decisions (the
controller, ISR changes, leader checks) read a state znode fresh, but a view of a topic's partitions
(``GET /v3/clusters/{c}/topics/{t}/partitions``) of thousands of partitions cannot afford one ZooKeeper read
per partition per request. :class:`PartitionStateCache` reads the states a view asks for once, pipelined,
with a one-shot watch on each znode, and re-reads (re-arming the watch) a znode each time it changes, so
later views answer from memory, at most one ZooKeeper round trip behind. A deleted znode leaves the
cache; a lost ZooKeeper session (watches gone) empties it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from functools import partial

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from lakelog.replication.errors import UnknownTopicError
from lakelog.replication.metadata import ClusterMetadata, PartitionState

__all__ = ["PartitionStateCache"]

log = logging.getLogger(__name__)


class PartitionStateCache:
    """Watched partition states of the partitions views asked for: ``{topic: {partition: PartitionState}}``.

    Args:
        metadata: the ZooKeeper accessor (its kazoo client must be started).

    Thread-safety: watch callbacks run on kazoo's threads and update the cache under a lock; readers on
    the event loop take a copy under the same lock.
    """

    def __init__(self, metadata: ClusterMetadata) -> None:
        self.metadata = metadata
        self._states: dict[str, dict[int, PartitionState]] = {}
        self._armed: set[tuple[str, int]] = set()  # znodes with a watch set
        self._lock = threading.Lock()
        self._stopping = False
        metadata.zk.add_listener(self._on_connection_state)

    def stop(self) -> None:
        """Ignore further watch events (watches already set fire once more and are not re-armed)."""
        self._stopping = True
        self.metadata.zk.remove_listener(self._on_connection_state)

    async def states(self, topic: str, partitions: list[int]) -> dict[int, PartitionState]:
        """The states of ``partitions`` of ``topic``: from memory where watched, the rest read from ZooKeeper
        (pipelined, in one worker thread) and watched from now on.

        Raises:
            UnknownTopicError: a state znode is missing (the topic was deleted meanwhile) (404 / 40401).
        """
        with self._lock:
            cached = dict(self._states.get(topic, {}))
        missing = [p for p in partitions if p not in cached]
        if missing:
            cached.update(await asyncio.to_thread(self._read_and_watch, topic, missing))
        return {p: cached[p] for p in partitions}

    # -- kazoo's threads ----------------------------------------------------------------------------

    def _read_and_watch(self, topic: str, partitions: list[int]) -> dict[int, PartitionState]:
        pending = [(p, self._get(topic, p)) for p in partitions]  # every get sent before any answer is awaited
        states: dict[int, PartitionState] = {}
        for p, answer in pending:
            try:
                data, stat = answer.get()
            except NoNodeError:
                self._forget(topic, p)
                raise UnknownTopicError(topic) from None
            states[p] = PartitionState.from_json(data, stat.version)
            self._store(topic, p, states[p])
        return states

    def _get(self, topic: str, partition: int):
        """An asynchronous read of the state znode, setting its watch unless one is set already."""
        with self._lock:
            armed = (topic, partition) in self._armed
            self._armed.add((topic, partition))
        return self.metadata.zk.get_async(self.metadata.state_path(topic, partition),
                                          watch=None if armed else partial(self._on_event, topic, partition))

    def _store(self, topic: str, partition: int, state: PartitionState) -> None:
        with self._lock:
            states = self._states.setdefault(topic, {})
            old = states.get(partition)
            if old is None or state.version > old.version:  # a slower, older read never overwrites a newer one
                states[partition] = state

    def _forget(self, topic: str, partition: int) -> None:
        with self._lock:
            self._armed.discard((topic, partition))
            states = self._states.get(topic)
            if states is not None:
                states.pop(partition, None)
                if not states:
                    del self._states[topic]

    def _on_event(self, topic: str, partition: int, event: WatchedEvent) -> None:
        with self._lock:
            self._armed.discard((topic, partition))  # a watch fires once
        if self._stopping:
            return
        if event.type == EventType.DELETED:
            self._forget(topic, partition)
            return
        self._get(topic, partition).rawlink(partial(self._on_reread, topic, partition))

    def _on_reread(self, topic: str, partition: int, answer) -> None:
        try:
            data, stat = answer.get()
        except NoNodeError:
            self._forget(topic, partition)
            return
        except Exception as e:  # noqa: BLE001 - the connection dropped: the entry goes, the next view re-reads
            log.debug("re-reading the state of %s-%d failed: %s", topic, partition, e)
            self._forget(topic, partition)
            return
        self._store(topic, partition, PartitionState.from_json(data, stat.version))

    def _on_connection_state(self, state: str) -> None:
        if state == KazooState.LOST:  # the session's watches are gone with it
            with self._lock:
                self._states.clear()
                self._armed.clear()
