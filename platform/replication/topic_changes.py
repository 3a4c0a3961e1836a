"""Topic changes on a running broker: the ZooKeeper watches that keep its topics, logs and partition
roles current, and the admin changes (``lakelog topics alter``) that make them.

Kafka's ZooKeeper-mode brokers learn of topic changes through watches (the controller's
``TopicChangeHandler`` and ``PartitionModificationsHandler``, ``ConfigChangeListener`` for configs);
here every broker watches for itself:

- the children of ``/lakelog/topics`` (a topic created or deleted): :meth:`ReplicaManager.refresh_topics
  <lakelog.replication.replica_manager.ReplicaManager.refresh_topics>` reloads the topics and drops the
  logs of deleted ones, then :meth:`TopicChanges.watch` sets the watches below (kazoo's ``DataWatch``
  reads the znode when it is set: that blocking read runs in a worker thread, never on the event loop;
  a watch ends when its znode is deleted, and a re-created topic gets new ones);
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
from collections.abc import Callable, Coroutine, Hashable, Iterable
from typing import TYPE_CHECKING, Any

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

    async def watch(self, topics: dict[str, TopicMetadata]) -> None:
        """Watch the znode data of every topic in ``topics`` and the state of every partition of them
        this broker replicates; forget the watches of topics no longer there (or re-created).

        Called on the event loop after each reload of the topic list; the watches are set in worker
        threads."""
        for name, topic_id in list(self._watched_topics.items()):
            meta = topics.get(name)
            if meta is None or meta.topic_id != topic_id:
                del self._watched_topics[name]
        for key, topic_id in list(self._watched_states.items()):
            meta = topics.get(key[0])
            if meta is None or meta.topic_id != topic_id:
                del self._watched_states[key]
        setters = []
        for meta in topics.values():
            setters += self._topic_watch(meta.name, meta.topic_id)
            setters += self._partition_watches(meta)
        await self._set_watches(setters)

    def _topic_watch(self, name: str, topic_id: str) -> list[Callable[[], Any]]:
        """The topic znode's data watch: each change is applied on the event loop (:meth:`apply`)."""

        def on_change(data: bytes, stat) -> Coroutine | bool | None:
            try:
                meta = self.metadata.topic_from_json(name, data, stat.version)
            except (ValueError, KeyError) as e:
                log.warning("topic %s: unreadable topic znode: %s", name, e)
                return None  # keep watching: the next change may be readable
            if meta.topic_id != topic_id:
                return False  # re-created: the topic list's watch sets a new watch
            return self.apply(meta)

        return self._data_watch(self._watched_topics, name, topic_id, self.metadata.topic_path(name), on_change)

    def _partition_watches(self, meta: TopicMetadata) -> list[Callable[[], Any]]:
        """The state watches of the topic's partitions this broker replicates and does not watch yet: each
        state change is applied on the event loop (:meth:`ReplicaManager.apply_state`)."""
        setters = []
        for p, replicas in sorted(meta.replicas.items()):
            if self.broker_id in replicas:
                setters += self._data_watch(
                    self._watched_states, (meta.name, p), meta.topic_id, self.metadata.state_path(meta.name, p),
                    lambda data, stat, p=p: self.rm.apply_state(meta.name, p, meta.topic_id,
                                                                PartitionState.from_json(data, stat.version)))
        return setters

    def _data_watch(self, registry: dict[Any, str], key: Hashable, topic_id: str, path: str,
                    on_change: Callable[[bytes, Any], Coroutine | bool | None]) -> list[Callable[[], Any]]:
        """Register ``key`` -> ``topic_id`` in ``registry`` and return the setter of a kazoo DataWatch on
        ``path`` (none when ``key`` is already watched for that topic id, or when stopping); run the
        setter in a worker thread (:meth:`_set_watches`: the DataWatch reads the znode at once).

        The watch calls ``on_change(data, stat)`` in kazoo's thread for the znode's data now and after
        each change; a coroutine it returns runs on the event loop, False ends the watch. The watch also
        ends when stopping, when ``registry`` no longer names this topic id for ``key`` (forgotten, or
        re-created), and when the znode is deleted (the topic is; a re-created topic gets a new watch
        from the topic list's)."""
        if self._stopping or registry.get(key) == topic_id:
            return []
        registry[key] = topic_id

        def on_data(data, stat, event=None):
            if self._stopping or registry.get(key) != topic_id:
                return False
            if data is None:
                return False  # deleted
            if self._loop is None:
                return None
            result = on_change(data, stat)
            if result is False:
                return False
            if asyncio.iscoroutine(result):
                asyncio.run_coroutine_threadsafe(result, self._loop)
            return None

        def set_watch() -> None:
            try:
                self.zk.DataWatch(path, on_data)
            except Exception:
                # not watched after all: the next reload of the topic list tries again
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._forget, registry, key, topic_id)
                raise

        return [set_watch]

    @staticmethod
    def _forget(registry: dict[Any, str], key: Hashable, topic_id: str) -> None:
        if registry.get(key) == topic_id:
            del registry[key]

    async def _set_watches(self, setters: list[Callable[[], Any]]) -> None:
        """Run the DataWatch setters in worker threads (each reads its znode, a blocking ZooKeeper call),
        concurrently. A failure is logged; the others are set."""
        results = await asyncio.gather(*(asyncio.to_thread(setter) for setter in setters), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            log.warning("%d of %d ZooKeeper watches could not be set (retried at the next topic reload): %s",
                        len(failed), len(setters), failed[0])

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
        latest = self.cache.topic(meta.name)  # meta, or a newer version of the same topic
        await self._apply_config(latest)
        await self._set_watches(self._partition_watches(latest))
        if latest.partitions_count > cached.partitions_count:
            log.info("topic %s has %d partitions now (was %d)", latest.name, latest.partitions_count,
                     cached.partitions_count)

    async def _apply_config(self, meta: TopicMetadata) -> None:
        """``PartitionLog.update_config`` on every open log of the topic whose config differs."""
        async with self._config_lock:  # one change at a time: the newest config is applied last
            latest = self.cache.cached_topic(meta.name)
            if latest is None or latest.topic_id != meta.topic_id:
                return  # deleted or re-created: another topic's config never reaches these logs
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
