"""The broker's cache of cluster metadata: topics, live brokers and their URLs, fed by ZooKeeper watches.

Kafka's ``MetadataCache``: every broker answers metadata requests for the whole cluster from memory.
Topics are reloaded when the children of ``/lakelog/topics`` change (and on a miss); one topic is
replaced when its znode's data changes (configs altered, partitions added: :meth:`MetadataCache.update_topic`,
fed by :mod:`lakelog.replication.topic_changes`), never by an older read of it; live brokers when
the children of ``/lakelog/brokers/ids`` change (reads numbered, so a slow older read never overwrites a
newer one). ZooKeeper reads run in worker threads; the cache is read on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from lakelog.replication.errors import UnknownPartitionError, UnknownTopicError
from lakelog.replication.partition_state_cache import PartitionStateCache
from lakelog.replication.metadata import (
    BROKERS_PATH,
    BrokerInfo,
    ClusterMetadata,
    PartitionState,
    TopicMetadata,
)

log = logging.getLogger(__name__)


def _grew(old: TopicMetadata | None, new: TopicMetadata) -> bool:
    """True when ``new`` is the same topic as ``old`` with more partitions."""
    return old is not None and old.topic_id == new.topic_id and new.partitions_count > old.partitions_count


def supersedes(new: TopicMetadata, old: TopicMetadata | None) -> bool:
    """Whether ``new`` should replace ``old`` in the cache: the one rule of topic versions. True unless
    ``old`` is the same topic (same topic id) at the same or a newer znode version; another topic id
    (the topic re-created) or nothing cached is always replaced."""
    return old is None or old.topic_id != new.topic_id or new.version > old.version


class MetadataCache:
    """Topics and live brokers as last read from ZooKeeper.

    Args:
        metadata: the ZooKeeper accessor (a started kazoo client inside).

    Call :meth:`watch_brokers` once inside the serving event loop; :meth:`reload_topics` whenever the
    topics may have changed (the replica manager does, on its topics watch).
    """

    def __init__(self, metadata: ClusterMetadata) -> None:
        self.metadata = metadata
        self._topics: dict[str, TopicMetadata] = {}
        self._live_brokers: dict[int, BrokerInfo] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._brokers_reload: asyncio.Task | None = None
        self._brokers_read_at = 0.0
        self._brokers_reads_started = 0
        self._brokers_read_applied = 0
        self._topics_lock = asyncio.Lock()
        self._growth_listeners: list[Callable[[str], None]] = []
        self.partition_state_cache = PartitionStateCache(metadata)

    async def watch_brokers(self) -> None:
        """Start the ChildrenWatch on the live brokers (its first call loads them)."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.metadata.zk.ChildrenWatch, BROKERS_PATH, self._on_brokers_changed)

    def stop(self) -> None:
        """Ignore further watch events."""
        self._stopping = True
        self.partition_state_cache.stop()

    # -- topics ---------------------------------------------------------------------------------

    async def reload_topics(self) -> dict[str, TopicMetadata]:
        """Re-read every topic from ZooKeeper (a topic deleted meanwhile is skipped); return them by name."""
        async with self._topics_lock:
            names = await asyncio.to_thread(self.metadata.topics)
            topics = {}
            for name in names:
                try:
                    topics[name] = await asyncio.to_thread(self.metadata.topic, name)
                except UnknownTopicError:
                    continue
            for name, meta in topics.items():  # a change applied while we read stays
                cached = self._topics.get(name)
                if cached is not None and not supersedes(meta, cached):
                    topics[name] = cached
            grown = [n for n, meta in topics.items() if _grew(self._topics.get(n), meta)]
            self._topics = topics
            self._notify_growth(grown)
            return dict(topics)

    def update_topic(self, meta: TopicMetadata) -> bool:
        """Serve ``meta`` (a topic znode's newer data) from now on; returns False, changing nothing, when
        the cache holds the same or a newer version of that topic. A topic not cached (or re-created
        with a new id) is taken as it is."""
        old = self._topics.get(meta.name)
        if not supersedes(meta, old):
            return False
        self._topics = {**self._topics, meta.name: meta}
        if _grew(old, meta):
            self._notify_growth([meta.name])
        return True

    def add_growth_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(topic)`` (in the caller's thread, usually the event loop) whenever the cache
        takes a topic with more partitions than it had (``topics alter --partitions``): consumer groups
        subscribed to it rebalance, as Kafka's consumers do when their metadata shows new partitions."""
        self._growth_listeners.append(listener)

    def _notify_growth(self, topics: list[str]) -> None:
        for name in topics:
            for listener in list(self._growth_listeners):
                try:
                    listener(name)
                except Exception:  # noqa: BLE001 - one listener must not stop the cache
                    log.exception("a partition growth listener failed for %s", name)

    async def reload_topic(self, name: str) -> TopicMetadata:
        """Re-read one topic from ZooKeeper into the cache (kept if the cache already has a newer one).

        Raises :class:`UnknownTopicError`."""
        meta = await asyncio.to_thread(self.metadata.topic, name)
        self.update_topic(meta)
        return self.topic(name)

    def topics(self) -> dict[str, TopicMetadata]:
        """The cached topic metadata by name."""
        return dict(self._topics)

    def topic(self, name: str) -> TopicMetadata:
        """Cached metadata of ``name``. Raises :class:`UnknownTopicError`."""
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicError(name)
        return meta

    def cached_topic(self, name: str) -> TopicMetadata | None:
        """Cached metadata of ``name``, or None."""
        return self._topics.get(name)

    @staticmethod
    def check_partition(meta: TopicMetadata, partition: int) -> None:
        """Raises :class:`UnknownPartitionError` if ``partition`` is not one of the topic's."""
        if partition not in meta.replicas:
            raise UnknownPartitionError(meta.name, partition, meta.partitions_count)

    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Leader, epoch and ISR of a partition, read from ZooKeeper (not cached)."""
        return await asyncio.to_thread(self.metadata.partition_state, topic, partition)

    async def watched_partition_states(self, topic: str, partitions: list[int]) -> dict[int, PartitionState]:
        """Leader, epoch and ISR of many partitions for a view: kept in memory by ZooKeeper watches after
        the first read (:class:`~lakelog.replication.partition_state_cache.PartitionStateCache`), so they may
        lag a change by one ZooKeeper round trip. Decisions read :meth:`partition_state`.

        Raises:
            UnknownTopicError: the topic was deleted meanwhile (404 / 40401).
        """
        return await self.partition_state_cache.states(topic, partitions)

    # -- brokers --------------------------------------------------------------------------------

    async def brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers by id, read from ZooKeeper."""
        return await asyncio.to_thread(self.metadata.brokers)

    async def broker_url(self, broker_id: int) -> str | None:
        """``http://host:port`` of a live broker, or None.

        Answered from the live brokers kept by the watch; an id missing from them is looked up in
        ZooKeeper (at most once a second).
        """
        info = self._live_brokers.get(broker_id)
        if info is None:
            reload = self._brokers_reload
            if reload is None or (reload.done() and time.monotonic() - self._brokers_read_at > 1.0):
                reload = self._start_brokers_reload()
            await asyncio.shield(reload)  # a read under way (the watch's, say) is awaited, not repeated
            info = self._live_brokers.get(broker_id)
        return info.url if info is not None else None

    def _on_brokers_changed(self, children: list[str]) -> None:
        # kazoo's thread: hop to the event loop.
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._start_brokers_reload)

    def _start_brokers_reload(self) -> asyncio.Task:
        self._brokers_reads_started += 1
        self._brokers_read_at = time.monotonic()
        self._brokers_reload = asyncio.get_running_loop().create_task(
            self._reload_brokers(self._brokers_reads_started), name="reload-brokers")
        return self._brokers_reload

    async def _reload_brokers(self, number: int) -> None:
        try:
            brokers = await self.brokers()
        except Exception as e:
            log.warning("reading the live brokers failed: %s", e)
            return
        if number > self._brokers_read_applied:  # a slow older read never overwrites a newer one
            self._brokers_read_applied = number
            self._live_brokers = brokers
