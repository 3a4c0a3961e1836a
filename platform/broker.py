"""The broker: partition logs, their group committers, and the broker's place in ZooKeeper.

One :class:`Broker` runs per broker process, inside the gateway's asyncio event loop. It registers
itself under ``/lakelog/brokers/ids/{id}``, keeps a cache of topic metadata fed by a ZooKeeper watch,
opens the logs of the partitions it leads, and serves produce and fetch for them.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from kazoo.client import KazooClient, KazooState

from lakelog.config import BrokerSettings, TopicConfig
from lakelog.consumer_groups.offset_store import OFFSETS_TABLE, OffsetStore
from lakelog.log_tables.group_commit import GroupCommitter
from lakelog.log_tables.partition_log import AppendInfo, PartitionLog
from lakelog.log_tables.schema import table_dir_name
from lakelog.replication.errors import (
    LeaderNotAvailableError,
    NotLeaderError,
    UnknownPartitionError,
    UnknownTopicError,
)
from lakelog.replication.metadata import (
    TOPICS_PATH,
    BrokerInfo,
    ClusterMetadata,
    PartitionState,
    TopicMetadata,
)

log = logging.getLogger(__name__)

TOPIC_ID_FILE = "_lakelog_topic_id"


@dataclass
class LocalPartition:
    """A partition replica this broker holds: its log, committer and long-poll signal."""

    topic: str
    partition: int
    topic_id: str
    log: PartitionLog
    committer: GroupCommitter
    leader_epoch: int = 0
    _hw_moved: asyncio.Event = field(default_factory=asyncio.Event)

    def notify_high_watermark(self) -> None:
        """Wake every fetch waiting for new records (called in the event loop)."""
        event, self._hw_moved = self._hw_moved, asyncio.Event()
        event.set()

    async def wait_for_records(self, offset: int, timeout_s: float) -> None:
        """Return once the high watermark is above ``offset`` or after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        while self.log.high_watermark <= offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            event = self._hw_moved
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                return


class Broker:
    """One broker: serves the partitions it leads, registered in ZooKeeper.

    Args:
        settings: the broker's settings (``broker.id``, ``log.dirs``, ``zookeeper.connect``, ...).

    Call :meth:`start` and :meth:`stop` inside the event loop that serves requests.
    """

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.log_dirs = Path(settings.log_dirs).resolve()
        self.zk = KazooClient(hosts=settings.zookeeper_connect,
                              timeout=settings.zookeeper_session_timeout_ms / 1000.0)
        self.metadata = ClusterMetadata(self.zk)
        self.cluster_id = ""
        self._topics: dict[str, TopicMetadata] = {}
        self._partitions: dict[tuple[str, int], LocalPartition] = {}
        self._open_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self.offset_store: OffsetStore | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to ZooKeeper, register, load topic metadata, open the led partitions' logs.

        Raises:
            kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable in the session timeout.
            lakelog.replication.errors.BrokerIdInUseError: the broker id is taken by a live broker.
        """
        self._loop = asyncio.get_running_loop()
        self.log_dirs.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self.zk.start)
        self.zk.add_listener(self._on_zk_state)
        await asyncio.to_thread(self.metadata.ensure_paths)
        self.cluster_id = await asyncio.to_thread(self.metadata.cluster_id)
        await asyncio.to_thread(self.metadata.register_broker, BrokerInfo(
            self.broker_id, self.settings.host, self.settings.port, self.settings.rack, int(time.time() * 1000)))
        self.offset_store = await asyncio.to_thread(OffsetStore, str(self.log_dirs / OFFSETS_TABLE))
        self.zk.ChildrenWatch(TOPICS_PATH, self._on_topics_changed)
        await self.refresh_topics()
        log.info("broker %d started: cluster %s, log dirs %s, %d topic(s)", self.broker_id, self.cluster_id,
                 self.log_dirs, len(self._topics))

    async def stop(self) -> None:
        """Commit queued appends, close the logs, leave ZooKeeper (the ephemeral node goes away)."""
        self._stopping = True
        for part in list(self._partitions.values()):
            await part.committer.close()
            part.log.close()
        self._partitions.clear()
        try:
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.exception("leaving ZooKeeper failed")
        log.info("broker %d stopped", self.broker_id)

    def _on_zk_state(self, state: str) -> None:
        if state == KazooState.LOST:
            log.warning("ZooKeeper session lost")
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended")

    def _on_topics_changed(self, children: list[str]) -> None:
        # kazoo's thread: hop to the event loop.
        if self._loop is not None and not self._stopping:
            asyncio.run_coroutine_threadsafe(self.refresh_topics(), self._loop)

    async def refresh_topics(self) -> None:
        """Reload topic metadata from ZooKeeper; drop the logs of deleted (or re-created) topics."""
        async with self._open_lock:
            names = await asyncio.to_thread(self.metadata.topics)
            topics = {}
            for name in names:
                try:
                    topics[name] = await asyncio.to_thread(self.metadata.topic, name)
                except UnknownTopicError:
                    continue
            self._topics = topics
            for key, part in list(self._partitions.items()):
                meta = topics.get(part.topic)
                if meta is None or meta.topic_id != part.topic_id:
                    await self._drop_partition(key, delete_data=True)

    # -- metadata -------------------------------------------------------------------------------

    def topics(self) -> dict[str, TopicMetadata]:
        """The cached topic metadata by name."""
        return dict(self._topics)

    def topic(self, name: str) -> TopicMetadata:
        """Cached metadata of ``name``. Raises :class:`UnknownTopicError`."""
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicError(name)
        return meta

    async def topic_fresh(self, name: str) -> TopicMetadata:
        """Metadata of ``name``, re-read from ZooKeeper if the cache does not have it yet."""
        if name not in self._topics:
            await self.refresh_topics()
        return self.topic(name)

    def check_partition(self, meta: TopicMetadata, partition: int) -> None:
        """Raises :class:`UnknownPartitionError` if ``partition`` is not one of the topic's."""
        if partition not in meta.replicas:
            raise UnknownPartitionError(meta.name, partition, meta.partitions_count)

    async def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Leader, epoch and ISR of a partition, from ZooKeeper."""
        return await asyncio.to_thread(self.metadata.partition_state, topic, partition)

    async def brokers(self) -> dict[int, BrokerInfo]:
        """Live brokers by id."""
        return await asyncio.to_thread(self.metadata.brokers)

    async def group_generation(self, group: str) -> int | None:
        """The group's current generation from ZooKeeper, or None if it has no membership state."""
        return await asyncio.to_thread(self.metadata.group_generation, group)

    async def group_members(self, group: str) -> list[str]:
        """Ids of the group's live members (ephemeral znodes)."""
        return await asyncio.to_thread(self.metadata.group_members, group)

    # -- local partitions -----------------------------------------------------------------------

    def table_uri(self, topic: str, partition: int) -> str:
        """Where this broker keeps the partition's Delta table."""
        return str(self.log_dirs / table_dir_name(topic, partition))

    async def leader_partition(self, topic: str, partition: int) -> LocalPartition:
        """The local partition if this broker leads it, opening its log on first use.

        Raises:
            UnknownTopicError, UnknownPartitionError, NotLeaderError (naming the leader),
            LeaderNotAvailableError.
        """
        part = self._partitions.get((topic, partition))
        if part is not None:
            return part
        meta = await self.topic_fresh(topic)
        self.check_partition(meta, partition)
        async with self._open_lock:
            part = self._partitions.get((topic, partition))
            if part is not None:
                return part
            state = await self.partition_state(topic, partition)
            if state.leader != self.broker_id:
                brokers = await self.brokers()
                leader = brokers.get(state.leader)
                if leader is None:
                    raise LeaderNotAvailableError(
                        f"Partition {topic}-{partition} has no live leader (broker {state.leader} is down).")
                raise NotLeaderError(f"Broker {self.broker_id} is not the leader of {topic}-{partition}; "
                                     f"the leader is broker {state.leader} at {leader.url}.")
            plog = await asyncio.to_thread(self._open_log, meta, partition)
            part = LocalPartition(meta.name, partition, meta.topic_id, plog, None, state.leader_epoch)  # type: ignore[arg-type]

            def on_append(info: AppendInfo) -> None:
                # The ISR is this replica alone: committed to its Delta table = committed.
                if plog.advance_high_watermark(info.last_offset + 1):
                    part.notify_high_watermark()

            part.committer = GroupCommitter(plog, linger_ms=self.settings.linger_ms,
                                            batch_size=self.settings.batch_size, on_append=on_append,
                                            leader_epoch=lambda: part.leader_epoch,
                                            segment_files_max=self.settings.log_segment_files_max)
            self._partitions[(topic, partition)] = part
            return part

    def _open_log(self, meta: TopicMetadata, partition: int) -> PartitionLog:
        """Open (or create) the partition's table; a table left by an older topic of that name is removed."""
        uri = self.table_uri(meta.name, partition)
        id_file = Path(uri) / TOPIC_ID_FILE
        if id_file.exists() and id_file.read_text().strip() != meta.topic_id:
            log.info("removing the log of an older topic %s-%d", meta.name, partition)
            shutil.rmtree(uri)
        plog = PartitionLog.open(topic=meta.name, partition=partition, table_uri=uri, config=meta.config,
                                 tail_cache_max_bytes=self.settings.log_tail_cache_max_bytes)
        if not id_file.exists():
            id_file.write_text(meta.topic_id)
        return plog

    async def _drop_partition(self, key: tuple[str, int], *, delete_data: bool) -> None:
        part = self._partitions.pop(key, None)
        if part is None:
            return
        await part.committer.close()
        part.log.close()
        if delete_data:
            await asyncio.to_thread(shutil.rmtree, part.log.table_uri, True)

    # -- admin ----------------------------------------------------------------------------------

    async def create_topic(self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMetadata:
        """Create a topic in ZooKeeper and open the logs this broker leads.

        ``partitions`` defaults to ``num.partitions``, ``replication_factor`` to
        ``default.replication.factor``; ``max.message.bytes`` defaults to ``message.max.bytes``.

        Raises:
            the errors of :meth:`ClusterMetadata.create_topic`.
        """
        configs = dict(configs or {})
        if self.settings.message_max_bytes != TopicConfig().max_message_bytes:
            configs.setdefault("max.message.bytes", str(self.settings.message_max_bytes))
        meta = await asyncio.to_thread(
            self.metadata.create_topic, name,
            partitions=partitions or self.settings.num_partitions,
            replication_factor=replication_factor or self.settings.default_replication_factor,
            configs=configs)
        await self.refresh_topics()
        for p, replicas in meta.replicas.items():
            if replicas[0] == self.broker_id:
                await self.leader_partition(name, p)
        return meta

    async def delete_topic(self, name: str) -> None:
        """Delete a topic and drop its local logs. Raises :class:`UnknownTopicError`."""
        await asyncio.to_thread(self.metadata.delete_topic, name)
        await self.refresh_topics()

    # -- produce and fetch ----------------------------------------------------------------------

    async def produce(self, topic: str, partition: int, records: pa.Table) -> int:
        """Append a normalised, already validated produce batch; return the offset of its first record."""
        part = await self.leader_partition(topic, partition)
        return await part.committer.append(records)

    async def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
                    max_wait_ms: int, columns: list[str] | None = None) -> tuple[pa.Table, LocalPartition]:
        """Records from ``offset`` below the high watermark, waiting up to ``max_wait_ms`` for some.

        Raises:
            OffsetOutOfRangeError: offset below the log start offset or above the high watermark.
        """
        part = await self.leader_partition(topic, partition)
        table = await asyncio.to_thread(part.log.read, offset, max_bytes=max_bytes, columns=columns)
        if table.num_rows == 0 and max_wait_ms > 0:
            await part.wait_for_records(offset, max_wait_ms / 1000.0)
            table = await asyncio.to_thread(part.log.read, offset, max_bytes=max_bytes, columns=columns)
        return table, part

