"""Topic changes on a running broker: the ZooKeeper watches that keep its topics, logs and partition
roles current, and the admin changes (``lakelog topics alter``) that make them.

Kafka's ZooKeeper-mode brokers learn of topic changes through watches (the controller's
``TopicChangeHandler`` and ``PartitionModificationsHandler``, ``ConfigChangeListener`` for configs);
here every broker watches for itself:

- the children of ``/lakelog/topics`` (a topic created or deleted): :meth:`ReplicaManager.refresh_topics
  <lakelog.replication.replica_manager.ReplicaManager.refresh_topics>` reloads the topics and drops the
  logs of deleted ones, then :meth:`TopicChanges.watch` sets the watches below;
- the data of each topic znode (a DataWatch per topic and topic id): configs altered or partitions
  added (:meth:`TopicChanges.apply`). The metadata cache serves the new topic (produce validation reads
  ``max.message.bytes`` from it, producers' murmur2 partitioning its partition count); every open log
  of the topic takes the new :class:`~lakelog.config.TopicConfig` through ``PartitionLog.update_config``
  (in a worker thread, one change at a time, newest config last); a new partition this broker
  replicates gets its state watched, so it is opened and its role taken up;
- the state znode of each partition this broker replicates: its role (leader, follower) follows
  each change (:meth:`ReplicaManager.apply_state <lakelog.replication.replica_manager.ReplicaManager.apply_state>`).

The admin side (:meth:`TopicChanges.alter_configs`, :meth:`TopicChanges.add_partitions`) writes the
change with :class:`~lakelog.replication.metadata.ClusterMetadata` and applies it here at once, so the
broker that answered serves it before its own watch fires.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from lakelog.errors import LakelogError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.replication.metadata import TOPICS_PATH, PartitionState, TopicMetadata
from lakelog.replication.topic_configs import ConfigChange

if TYPE_CHECKING:
    from lakelog.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class TopicChanges:
    """Watches topics and partition states for one broker's :class:`ReplicaManager` and applies changes.

    Args:
        replica_manager: the broker's replica manager (its ZooKeeper client, metadata, cache, partitions).

    Use inside the serving event loop: :meth:`start` (from ``ReplicaManager.start``), then :meth:`stop`.
    """

    def __init__(self, replica_manager: "ReplicaManager") -> None:
        self.rm = replica_manager
        self.zk = replica_manager.zk
        self.metadata = replica_manager.metadata
        self.cache = replica_manager.cache
        self.broker_id = replica_manager.broker_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._topics_refresh: concurrent.futures.Future | None = None
        self._watched_topics: dict[str, str] = {}  # topic -> topic id whose znode data is watched
        self._watched_states: dict[tuple[str, int], str] = {}  # partition -> topic id whose state is watched
        self._config_lock = asyncio.Lock()
        #: called on the event loop with the topic's new metadata when a topic got more partitions
        #: (e.g. for consumer groups to rebalance, as Kafka's consumers do on a partition count change)
        self.partitions_added_listeners: list[Callable[[TopicMetadata], None]] = []

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Watch the topic list; its first call loads the topics and sets every other watch."""
        self._loop = asyncio.get_running_loop()
        # the watch calls back once while it is set up: that call's refresh is the initial topic read
        await asyncio.to_thread(self.zk.ChildrenWatch, TOPICS_PATH, self._on_topics_changed)
        if self._topics_refresh is not None:
            await asyncio.wrap_future(self._topics_refresh)
        else:
            await self.rm.refresh_topics()

    def stop(self) -> None:
        """Ignore further watch events (each watch ends at its next call)."""
        self._stopping = True

    def _on_topics_changed(self, children: list[str]) -> bool | None:
        # kazoo's thread: hop to the event loop.
        if self._stopping:
            return False
        if self._loop is not None:
            self._topics_refresh = asyncio.run_coroutine_threadsafe(self.rm.refresh_topics(), self._loop)
        return None

    # -- watches --------------------------------------------------------------------------------

    def watch(self, topics: dict[str, TopicMetadata]) -> None:
        """Watch the znode data of every topic in ``topics`` and the state of every partition of them
        this broker replicates; forget the watches of topics no longer there (or re-created).

        Called on the event loop after each reload of the topic list."""
        for name, topic_id in list(self._watched_topics.items()):
            meta = topics.get(name)
            if meta is None or meta.topic_id != topic_id:
                del self._watched_topics[name]
        for key, topic_id in list(self._watched_states.items()):
            meta = topics.get(key[0])
            if meta is None or meta.topic_id != topic_id:
                del self._watched_states[key]
        for meta in topics.values():
            self._watch_topic(meta.name, meta.topic_id)
            self._watch_partitions(meta)

    def _watch_topic(self, name: str, topic_id: str) -> None:
        """DataWatch the topic znode; each change is applied on the event loop (:meth:`apply`)."""
        if self._watched_topics.get(name) == topic_id or self._stopping:
            return
        self._watched_topics[name] = topic_id

        def on_data(data, stat, event=None):
            if self._stopping or self._watched_topics.get(name) != topic_id:
                return False
            if data is None or self._loop is None:
                return None  # deleted: the topic list's watch drops it
            try:
                meta = self.metadata.topic_from_json(name, data, stat.version)
            except (ValueError, KeyError) as e:
                log.warning("topic %s: unreadable topic znode: %s", name, e)
                return None
            if meta.topic_id != topic_id:
                return False  # re-created: the topic list's watch sets a new watch
            asyncio.run_coroutine_threadsafe(self.apply(meta), self._loop)
            return None

        self.zk.DataWatch(self.metadata.topic_path(name), on_data)

    def _watch_partitions(self, meta: TopicMetadata) -> None:
        for p, replicas in sorted(meta.replicas.items()):
            if self.broker_id in replicas:
                self._watch_state(meta.name, p, meta.topic_id)

    def _watch_state(self, topic: str, partition: int, topic_id: str) -> None:
        """DataWatch the partition's state znode; each change is applied on the event loop."""
        key = (topic, partition)
        if self._watched_states.get(key) == topic_id or self._stopping:
            return
        self._watched_states[key] = topic_id

        def on_state(data, stat, event=None):
            if self._stopping or self._watched_states.get(key) != topic_id:
                return False
            if data is None or self._loop is None:
                return None
            state = PartitionState.from_json(data, stat.version)
            asyncio.run_coroutine_threadsafe(self.rm.apply_state(topic, partition, topic_id, state), self._loop)
            return None

        self.zk.DataWatch(self.metadata.state_path(topic, partition), on_state)

    # -- applying a change ----------------------------------------------------------------------

    async def apply(self, meta: TopicMetadata) -> None:
        """Take up a topic znode's data: serve it from the cache (unless the cache has a newer one),
        give every open log of the topic the newest config, watch the new partitions this broker
        replicates. Idempotent; a topic the cache does not know yet is reloaded with the topic list."""
        if self._stopping:
            return
        cached = self.cache.cached_topic(meta.name)
        if cached is None or cached.topic_id != meta.topic_id:
            await self.rm.refresh_topics()
            return
        self.cache.update_topic(meta)
        latest = self.cache.cached_topic(meta.name)
        if latest is None or latest.topic_id != meta.topic_id:
            return
        await self._apply_config(latest)
        self._watch_partitions(latest)
        if latest.partitions_count > cached.partitions_count:
            log.info("topic %s has %d partitions now (was %d)", latest.name, latest.partitions_count,
                     cached.partitions_count)
            for listener in list(self.partitions_added_listeners):
                try:
                    listener(latest)
                except Exception:
                    log.exception("a listener of topic %s's new partitions failed", latest.name)

    async def _apply_config(self, meta: TopicMetadata) -> None:
        """``PartitionLog.update_config`` on every open log of the topic whose config differs."""
        async with self._config_lock:  # one change at a time: the newest config is applied last
            latest = self.cache.cached_topic(meta.name) or meta
            try:
                config = latest.config
            except LakelogError as e:  # stored configs that do not validate: keep the logs as they are
                log.warning("topic %s: configs not applied: %s", meta.name, e)
                return
            for part in self.rm.partitions():
                if part.topic != meta.name or part.topic_id != meta.topic_id or part.log.config == config:
                    continue
                try:
                    await asyncio.to_thread(part.log.update_config, config)
                except Exception:  # a log closed meanwhile (partition dropped): nothing to update
                    log.exception("%s: applying the changed topic config failed", part.name)
                    continue
                log.info("%s: topic config changed on broker %d", part.name, self.broker_id)

    async def catch_up_config(self, plog: PartitionLog, meta: TopicMetadata) -> None:
        """Give a log just opened with ``meta``'s config any newer config the cache got meanwhile.

        Call before the log is registered as open: the loop ends with no await after its last check,
        so a change applied later finds the log among the open ones."""
        applied = meta.configs
        while True:
            latest = self.cache.cached_topic(meta.name)
            if latest is None or latest.topic_id != meta.topic_id or latest.configs == applied:
                return
            try:
                config = latest.config
            except LakelogError:
                return
            await asyncio.to_thread(plog.update_config, config)
            applied = latest.configs

    # -- admin ----------------------------------------------------------------------------------

    async def alter_configs(self, name: str, changes: Iterable[ConfigChange], *,
                            validate_only: bool = False) -> TopicMetadata:
        """Set and delete topic configs cluster-wide (``kafka-configs --alter``; ``changes`` are
        ``(name, "SET", value)`` and ``(name, "DELETE", None)``) and apply them here at once; the other
        brokers apply them from their watch. See
        :meth:`ClusterMetadata.alter_topic_configs <lakelog.replication.metadata.ClusterMetadata.alter_topic_configs>`.

        Raises:
            UnknownTopicError, lakelog.errors.ConfigError (naming the key, also one named twice; nothing
            written), TopicChangeConflictError, ZooKeeper errors.
        """
        meta = await asyncio.to_thread(self.metadata.alter_topic_configs, name, list(changes),
                                       validate_only=validate_only)
        if not validate_only:
            await self.apply(meta)
        return meta

    async def add_partitions(self, name: str, *, partitions_count: int, validate_only: bool = False) -> TopicMetadata:
        """Grow a topic to ``partitions_count`` partitions (``kafka-topics --alter --partitions``) and serve
        the new count here at once. Every new partition has its leader and ISR in ZooKeeper when this
        returns; the brokers' state watches open the logs (a produce that comes first opens its
        partition's log itself). See
        :meth:`ClusterMetadata.add_partitions <lakelog.replication.metadata.ClusterMetadata.add_partitions>`.

        Raises:
            UnknownTopicError, InvalidPartitionsError (not more than now), InvalidReplicationFactorError,
            TopicChangeConflictError, ZooKeeper errors.
        """
        meta = await asyncio.to_thread(self.metadata.add_partitions, name, partitions_count=partitions_count,
                                       validate_only=validate_only)
        if not validate_only:
            await self.apply(meta)
        return meta
