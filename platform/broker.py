"""The broker: partition logs, their group committers, and the broker's place in ZooKeeper.

One :class:`Broker` runs per broker process, inside the gateway's asyncio event loop. It registers
itself under ``/lakelog/brokers/ids/{id}``, takes part in the controller election
(:mod:`lakelog.replication.controller`), keeps a cache of topic metadata fed by a ZooKeeper watch,
opens the logs of the partitions it replicates, leads or follows each as its ZooKeeper state says, and
serves produce and fetch for the partitions it leads (replica fetches too).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pyarrow as pa
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError

from lakelog.config import BrokerSettings, TopicConfig
from lakelog.consumer_groups.offset_store import OFFSETS_TABLE, OffsetStore
from lakelog.log_tables.group_commit import GroupCommitter
from lakelog.log_tables.errors import FencedLeaderEpochError, OffsetOutOfRangeError
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.schema import table_dir_name
from lakelog.replication.controller import Controller, controlled_shutdown
from lakelog.replication.errors import (
    LeaderNotAvailableError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownPartitionError,
    UnknownTopicError,
)
from lakelog.replication.follower import ReplicaFetcher
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import (
    BROKERS_PATH,
    TOPICS_PATH,
    BrokerInfo,
    ClusterMetadata,
    PartitionState,
    TopicMetadata,
)

log = logging.getLogger(__name__)

TOPIC_ID_FILE = "_lakelog_topic_id"


@dataclass
class ReplicaProgress:
    """The leader's view of one follower (Kafka's ``Replica`` state on the leader).

    Attributes:
        log_end_offset: the follower's LEO = the offset of its last fetch; -1 until it fetched
            from this leader (an ISR member with an unknown LEO holds the high watermark back).
        last_caught_up_ms: last time (monotonic ms) the follower had everything the leader had.
        last_fetch_ms: time of its previous fetch; last_fetch_leader_leo: the leader's LEO then.
    """

    log_end_offset: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = 0


@dataclass
class LocalPartition:
    """A partition replica this broker holds: its log, committer, role and long-poll signals.

    ``role`` is ``"leader"``, ``"follower"`` or ``"none"`` (not yet told, or fenced after the ZooKeeper
    session ended); ``state`` is the last partition state applied from ZooKeeper.
    """

    topic: str
    partition: int
    topic_id: str
    log: PartitionLog
    committer: GroupCommitter
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    role: str = "none"
    state: PartitionState | None = None
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    fetcher: ReplicaFetcher | None = None
    epoch_start_offset: int = 0  # LEO when this broker became leader for the current epoch
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    isr_update_running: bool = False
    _hw_moved: asyncio.Event = field(default_factory=asyncio.Event)
    _leo_moved: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def isr(self) -> list[int]:
        """The in-sync replicas as last read from ZooKeeper."""
        return list(self.state.isr) if self.state is not None else []

    def notify_high_watermark(self) -> None:
        """Wake every fetch and acks=all produce waiting on the high watermark or the role (event loop)."""
        event, self._hw_moved = self._hw_moved, asyncio.Event()
        event.set()

    def notify_log_end_offset(self) -> None:
        """Wake every follower fetch waiting for new records (event loop)."""
        event, self._leo_moved = self._leo_moved, asyncio.Event()
        event.set()

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float, *, log_end: bool = False) -> bool:
        """Wait until ``condition()`` holds or ``timeout_s`` seconds passed; return ``condition()``.

        The condition is re-checked whenever the high watermark or the role moves (with ``log_end``:
        whenever the log end offset or the role moves), and at least once a second.
        """
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            event = self._leo_moved if log_end else self._hw_moved
            try:
                await asyncio.wait_for(event.wait(), min(remaining, 1.0))
            except asyncio.TimeoutError:
                pass
        return True

    async def wait_for_records(self, offset: int, timeout_s: float) -> None:
        """Return once the high watermark is above ``offset`` or after ``timeout_s`` seconds."""
        await self.wait_until(lambda: self.log.high_watermark > offset, timeout_s)

    async def wait_for_log_end(self, offset: int, timeout_s: float) -> None:
        """Return once the log end offset is above ``offset``, this broker stopped leading, or after
        ``timeout_s`` seconds."""
        await self.wait_until(lambda: self.log.log_end_offset > offset or self.role != "leader", timeout_s,
                              log_end=True)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Broker:
    """One broker: leader or follower of the partitions assigned to it, registered in ZooKeeper.

    Args:
        settings: the broker's settings (``broker.id``, ``log.dirs``, ``zookeeper.connect``, ...).

    Call :meth:`start` and :meth:`stop` inside the event loop that serves requests.

    Replication (DESIGN.md "Coordination"; Kafka's ``ReplicaManager`` and ``Partition``):

    - every partition state znode of a partition this broker replicates is watched; a state naming
      this broker as leader makes it leader (:meth:`_become_leader`), any other makes it follower
      (:meth:`_become_follower`: a :class:`~lakelog.replication.follower.ReplicaFetcher` pulls from
      the leader);
    - the leader learns each follower's LEO from its fetch offset, moves the high watermark to the
      smallest LEO in the ISR, takes a follower out of the ISR when it has not caught up for
      ``replica.lag.time.max.ms`` and back in once it has (ISR written to ZooKeeper with znode-version
      checks);
    - produce honours ``acks`` (0, 1, all) and ``min.insync.replicas``;
    - appends are stamped with the leader epoch; a deposed leader's appends are refused.
    """

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.log_dirs = Path(settings.log_dirs).resolve()
        self.zk = KazooClient(hosts=settings.zookeeper_connect,
                              timeout=settings.zookeeper_session_timeout_ms / 1000.0)
        self.metadata = ClusterMetadata(self.zk)
        self.controller = Controller(self.zk, self.broker_id, metadata=self.metadata,
                                     auto_leader_rebalance_enable=settings.auto_leader_rebalance_enable,
                                     leader_imbalance_check_interval_s=settings.leader_imbalance_check_interval_seconds)
        self.cluster_id = ""
        self._topics: dict[str, TopicMetadata] = {}
        self._partitions: dict[tuple[str, int], LocalPartition] = {}
        self._watched: dict[tuple[str, int], str] = {}  # partition -> topic id whose state is watched
        self._open_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._session_lost = False
        self._shut_down_controlled = False
        self._isr_task: asyncio.Task | None = None
        # live brokers, reloaded by a ChildrenWatch on the brokers path (reads numbered: a slow older
        # read never overwrites a newer one)
        self._live_brokers: dict[int, BrokerInfo] = {}
        self._brokers_reload: asyncio.Task | None = None
        self._brokers_read_at = 0.0
        self._brokers_reads_started = 0
        self._brokers_read_applied = 0
        self._topics_refresh: concurrent.futures.Future | None = None
        self.http: httpx.AsyncClient | None = None
        self.leader_client: LeaderClient | None = None
        self.offset_store: OffsetStore | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to ZooKeeper, register, join the controller election, take up partition roles.

        Raises:
            kazoo.handlers.threading.KazooTimeoutError: ZooKeeper not reachable in the session timeout.
            lakelog.replication.errors.BrokerIdInUseError: the broker id is taken by a live broker.
        """
        self._loop = asyncio.get_running_loop()
        self.log_dirs.mkdir(parents=True, exist_ok=True)
        self.http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=200, max_keepalive_connections=50))
        self.leader_client = LeaderClient(request_timeout_ms=self.settings.request_timeout_ms)
        await asyncio.to_thread(self.zk.start)
        self.zk.add_listener(self._on_zk_state)
        await asyncio.to_thread(self.metadata.ensure_paths)
        await asyncio.to_thread(self.zk.ChildrenWatch, BROKERS_PATH, self._on_brokers_changed)
        self.cluster_id = await asyncio.to_thread(self.metadata.cluster_id)
        await self._register()
        self.offset_store = await asyncio.to_thread(OffsetStore, str(self.log_dirs / OFFSETS_TABLE))
        await asyncio.to_thread(self.controller.start)
        # the watch calls back once while it is set up: that call's refresh is the initial topic read
        await asyncio.to_thread(self.zk.ChildrenWatch, TOPICS_PATH, self._on_topics_changed)
        if self._topics_refresh is not None:
            await asyncio.wrap_future(self._topics_refresh)
        else:
            await self.refresh_topics()
        self._isr_task = self._loop.create_task(self._isr_expiration_loop(), name="isr-expiration")
        log.info("broker %d started: cluster %s, log dirs %s, %d topic(s)", self.broker_id, self.cluster_id,
                 self.log_dirs, len(self._topics))

    async def _register(self) -> None:
        await asyncio.to_thread(self.metadata.register_broker, BrokerInfo(
            self.broker_id, self.settings.host, self.settings.port, self.settings.rack, int(time.time() * 1000)))

    async def stop(self) -> None:
        """Move leaderships away (controlled shutdown), commit queued appends, close the logs, leave ZooKeeper."""
        await self.controlled_shutdown()
        self._stopping = True
        if self._isr_task is not None:
            self._isr_task.cancel()
        for part in list(self._partitions.values()):
            if part.fetcher is not None:
                await part.fetcher.stop()
            await part.committer.close()
            part.log.close()
        self._partitions.clear()
        try:
            await asyncio.to_thread(self.controller.stop)
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.exception("leaving ZooKeeper failed")
        if self.http is not None:
            await self.http.aclose()
        if self.leader_client is not None:
            await self.leader_client.aclose()
        log.info("broker %d stopped", self.broker_id)

    async def controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: hand this broker's leaderships to other in-sync replicas and leave
        every ISR, so producers move on before the broker exits (``controlled.shutdown.enable``).

        Steps: 1. write the new partition states (compare-and-set, :func:`controlled_shutdown`);
        2. wait (up to 5 s) until this broker has applied them, so no produce is accepted here after.
        Idempotent; errors are logged, never raised (the broker stops anyway, as after a crash).
        """
        if self._shut_down_controlled or not self.settings.controlled_shutdown_enable or self._session_lost:
            return
        self._shut_down_controlled = True
        try:
            # 1. new leaders and ISRs in ZooKeeper
            moved = await asyncio.to_thread(controlled_shutdown, self.metadata, self.broker_id)
            # 2. our watches apply them
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(
                    p.role == "leader" and p.state is not None and len(p.state.isr) > 1
                    for p in self._partitions.values()):
                await asyncio.sleep(0.05)
            log.info("controlled shutdown of broker %d: %d partition state(s) moved", self.broker_id, moved)
        except Exception:
            log.exception("controlled shutdown failed")

    def _on_zk_state(self, state: str) -> None:
        # kazoo's thread: only schedule work on the event loop.
        if state == KazooState.LOST:
            if self._stopping:
                return
            log.warning("ZooKeeper session lost: fencing every partition until the session is re-established")
            self._session_lost = True
            if self._loop is not None and not self._stopping:
                asyncio.run_coroutine_threadsafe(self._fence_all(), self._loop)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended")
        elif state == KazooState.CONNECTED and self._session_lost and not self._stopping:
            self._session_lost = False
            if self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._rejoin(), self._loop)

    async def _fence_all(self) -> None:
        """The session ended: another broker may lead our partitions now; accept no appends."""
        for part in list(self._partitions.values()):
            async with part.lock:
                if part.fetcher is not None:
                    await part.fetcher.stop()
                    part.fetcher = None
                part.role = "none"
                part.notify_high_watermark()
                part.notify_log_end_offset()

    async def _rejoin(self) -> None:
        """A new session after the old one expired: register again and re-apply every partition state."""
        try:
            await self._register()
        except Exception:
            log.exception("registering again after the session expired failed")
        for (topic, p), part in list(self._partitions.items()):
            try:
                state = await self.partition_state(topic, p)
            except UnknownTopicError:
                continue
            await self._apply_state(topic, p, part.topic_id, state)
        log.info("broker %d rejoined after its ZooKeeper session expired", self.broker_id)

    def _on_topics_changed(self, children: list[str]) -> None:
        # kazoo's thread: hop to the event loop.
        if self._loop is not None and not self._stopping:
            self._topics_refresh = asyncio.run_coroutine_threadsafe(self.refresh_topics(), self._loop)

    def _on_brokers_changed(self, children: list[str]) -> None:
        # kazoo's thread: hop to the event loop.
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._start_brokers_reload)

    def _start_brokers_reload(self) -> asyncio.Task:
        """Re-read the live brokers (in a task) into the cache :meth:`broker_url` answers from."""
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

    async def refresh_topics(self) -> None:
        """Reload topic metadata from ZooKeeper; drop the logs of deleted (or re-created) topics; watch
        the state of every partition this broker replicates."""
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
            for key, topic_id in list(self._watched.items()):
                meta = topics.get(key[0])
                if meta is None or meta.topic_id != topic_id:
                    del self._watched[key]
        for meta in topics.values():
            for p, replicas in meta.replicas.items():
                if self.broker_id in replicas:
                    self._watch_partition(meta.name, p, meta.topic_id)

    def _watch_partition(self, topic: str, partition: int, topic_id: str) -> None:
        """DataWatch the partition's state znode; each change is applied on the event loop."""
        key = (topic, partition)
        if self._watched.get(key) == topic_id or self._stopping:
            return
        self._watched[key] = topic_id

        def on_state(data, stat, event=None):
            if self._stopping or self._watched.get(key) != topic_id:
                return False
            if data is None or self._loop is None:
                return None
            state = PartitionState.from_json(data, stat.version)
            asyncio.run_coroutine_threadsafe(self._apply_state(topic, partition, topic_id, state), self._loop)
            return None

        self.zk.DataWatch(self.metadata.state_path(topic, partition), on_state)

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

    async def broker_url(self, broker_id: int) -> str | None:
        """``http://host:port`` of a live broker, or None.

        Answered from the live brokers kept by the watch on the brokers path; an id missing from them
        is looked up in ZooKeeper (at most once a second).
        """
        info = self._live_brokers.get(broker_id)
        if info is None:
            reload = self._brokers_reload
            if reload is None or (reload.done() and time.monotonic() - self._brokers_read_at > 1.0):
                reload = self._start_brokers_reload()
            await asyncio.shield(reload)  # a read under way (the watch's, say) is awaited, not repeated
            info = self._live_brokers.get(broker_id)
        return info.url if info is not None else None

    async def partition_offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(log_start_offset, log_end_offset, high_watermark)`` of a partition, from its leader.

        Read locally when this broker leads the partition, else asked of the leader
        (``GET /topics/{t}/partitions/{p}``), so any broker answers for the whole cluster.

        Raises:
            UnknownTopicError, UnknownPartitionError, LeaderNotAvailableError (no live or reachable
            leader), NotLeaderError when the leader's answer lacks offsets.
        """
        try:
            part = await self.leader_partition(topic, partition)
            return part.log.log_start_offset, part.log.log_end_offset, part.log.high_watermark
        except NotLeaderError as e:
            if self.http is None or not e.leader_url:
                raise
            try:
                resp = await self.http.get(f"{e.leader_url}/topics/{topic}/partitions/{partition}", timeout=5.0)
            except httpx.HTTPError:
                raise LeaderNotAvailableError(f"The leader of {topic}-{partition} at {e.leader_url} does not "
                                              "answer; retry.") from None
            body = resp.json() if resp.status_code == 200 else {}
            if body.get("high_watermark") is None:
                raise
            return body["log_start_offset"], body["log_end_offset"], body["high_watermark"]

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

    def local_partition(self, topic: str, partition: int) -> LocalPartition | None:
        """The local replica of a partition, if this broker holds it open."""
        return self._partitions.get((topic, partition))

    async def leader_partition(self, topic: str, partition: int) -> LocalPartition:
        """The local partition if this broker leads it.

        Raises:
            UnknownTopicError, UnknownPartitionError, NotLeaderError (naming the leader),
            LeaderNotAvailableError.
        """
        part = self._partitions.get((topic, partition))
        if part is not None and part.role == "leader":
            return part
        if (part is not None and part.state is not None and part.state.leader != self.broker_id
                and not self._session_lost):
            # a replica here: its watched state names the leader, no ZooKeeper read needed
            raise await self._not_leader(topic, partition, part.state)
        meta = await self.topic_fresh(topic)
        self.check_partition(meta, partition)
        state = await self.partition_state(topic, partition)
        if state.leader == self.broker_id and self.broker_id in meta.replicas[partition] and not self._session_lost:
            # the watch has not delivered this state yet: apply it now
            await self._apply_state(topic, partition, meta.topic_id, state)
            part = self._partitions.get((topic, partition))
            if part is not None and part.role == "leader":
                return part
        raise await self._not_leader(topic, partition, state)

    async def _not_leader(self, topic: str, partition: int, state: PartitionState) -> Exception:
        if state.leader == self.broker_id:
            return LeaderNotAvailableError(f"Broker {self.broker_id} is becoming the leader of {topic}-{partition}; "
                                           "retry.")
        url = await self.broker_url(state.leader) if state.leader >= 0 else None
        if url is None:
            return LeaderNotAvailableError(
                f"Partition {topic}-{partition} has no live leader (leader {state.leader}, ISR {state.isr}).")
        return NotLeaderError(f"Broker {self.broker_id} is not the leader of {topic}-{partition}; "
                              f"the leader is broker {state.leader} at {url}.", leader_id=state.leader, leader_url=url)

    async def _open_partition(self, meta: TopicMetadata, partition: int) -> LocalPartition:
        """The local replica, opening (or creating) its log and committer on first use."""
        key = (meta.name, partition)
        part = self._partitions.get(key)
        if part is not None:
            return part
        async with self._open_lock:
            part = self._partitions.get(key)
            if part is not None:
                return part
            replicas = list(meta.replicas[partition])
            plog = await asyncio.to_thread(self._open_log, meta, partition, len(replicas) > 1)
            part = LocalPartition(meta.name, partition, meta.topic_id, plog, None, 0, replicas)  # type: ignore[arg-type]
            part.committer = GroupCommitter(plog, linger_ms=self.settings.linger_ms,
                                            batch_size=self.settings.batch_size,
                                            on_append=lambda info: self._after_leader_append(part),
                                            leader_epoch=lambda: self._append_epoch(part),
                                            segment_files_max=self.settings.log_segment_files_max)
            self._partitions[key] = part
            return part

    def _append_epoch(self, part: LocalPartition) -> int:
        """The epoch to stamp on a group commit; refuses the commit when this broker no longer leads."""
        if part.role != "leader":
            raise NotLeaderError(f"Broker {self.broker_id} is no longer the leader of {part.topic}-{part.partition}.")
        return part.leader_epoch

    def _open_log(self, meta: TopicMetadata, partition: int, replicated: bool) -> PartitionLog:
        """Open (or create) the partition's table; a table left by an older topic of that name is removed.

        A replicated partition's high watermark starts at the log start offset: the ISR moves it up.
        """
        uri = self.table_uri(meta.name, partition)
        id_file = Path(uri) / TOPIC_ID_FILE
        if id_file.exists() and id_file.read_text().strip() != meta.topic_id:
            log.info("removing the log of an older topic %s-%d", meta.name, partition)
            shutil.rmtree(uri)
        plog = PartitionLog.open(topic=meta.name, partition=partition, table_uri=uri, config=meta.config,
                                 tail_cache_max_bytes=self.settings.log_tail_cache_max_bytes,
                                 initial_high_watermark=0 if replicated else None)
        if not id_file.exists():
            id_file.write_text(meta.topic_id)
        return plog

    async def _drop_partition(self, key: tuple[str, int], *, delete_data: bool) -> None:
        part = self._partitions.pop(key, None)
        if part is None:
            return
        part.role = "none"
        if part.fetcher is not None:
            await part.fetcher.stop()
        await part.committer.close()
        part.log.close()
        part.notify_high_watermark()
        part.notify_log_end_offset()
        if delete_data:
            await asyncio.to_thread(shutil.rmtree, part.log.table_uri, True)

    # -- roles ----------------------------------------------------------------------------------

    async def _apply_state(self, topic: str, partition: int, topic_id: str, state: PartitionState) -> None:
        """Take up the role a partition state gives this broker (leader, follower), in state order."""
        if self._stopping:
            return
        meta = self._topics.get(topic)
        if meta is None or meta.topic_id != topic_id:
            meta = await self.topic_fresh(topic)
            if meta.topic_id != topic_id:
                return
        if self.broker_id not in meta.replicas.get(partition, []):
            return
        part = await self._open_partition(meta, partition)
        async with part.lock:
            if self._stopping or self._session_lost:
                return
            if self._partitions.get((topic, partition)) is not part:
                return  # dropped (and closed) while we waited for the lock
            if part.state is not None and state.version >= 0 and state.version < part.state.version:
                return  # an older event overtaken by a newer one
            if state.leader_epoch < part.leader_epoch:
                return
            part.state = state
            if state.leader == self.broker_id:
                if part.role != "leader" or part.leader_epoch != state.leader_epoch:
                    await self._become_leader(part, state)
                else:
                    self._maybe_advance_high_watermark(part)  # the ISR may have shrunk
            elif part.role != "follower" or part.leader_epoch != state.leader_epoch or (
                    part.fetcher is not None and part.fetcher.leader_id != state.leader) or (
                    part.fetcher is None and state.leader >= 0):
                await self._become_follower(part, state)
            part.notify_high_watermark()
            part.notify_log_end_offset()

    async def _become_leader(self, part: LocalPartition, state: PartitionState) -> None:
        """Kafka's makeLeader: stop fetching, fence older epochs, start tracking the followers."""
        if part.fetcher is not None:
            await part.fetcher.stop()
            part.fetcher = None
        part.log.fence(state.leader_epoch)
        part.leader_epoch = state.leader_epoch
        part.epoch_start_offset = part.log.log_end_offset
        now = _now_ms()
        part.progress = {b: ReplicaProgress(-1, now, now, 0) for b in part.replicas if b != self.broker_id}
        part.role = "leader"
        log.info("broker %d leads %s-%d at leader epoch %d (LEO %d, HW %d, ISR %s)", self.broker_id, part.topic,
                 part.partition, state.leader_epoch, part.log.log_end_offset, part.log.high_watermark, state.isr)
        self._maybe_advance_high_watermark(part)

    async def _become_follower(self, part: LocalPartition, state: PartitionState) -> None:
        """Kafka's makeFollower: no more appends here, fence older epochs, fetch from the new leader
        (the fetcher first truncates to what the leader confirms, KIP-101)."""
        part.role = "follower"
        part.leader_epoch = state.leader_epoch
        part.log.fence(state.leader_epoch)
        if part.fetcher is not None:
            await part.fetcher.stop()
            part.fetcher = None
        if state.leader < 0:
            log.info("%s-%d is offline (no leader); broker %d waits", part.topic, part.partition, self.broker_id)
            return
        assert self.http is not None
        part.fetcher = ReplicaFetcher(
            part.log, broker_id=self.broker_id, leader_id=state.leader, leader_epoch=state.leader_epoch,
            resolve_leader_url=self.broker_url, http=self.http,
            fetch_wait_max_ms=self.settings.replica_fetch_wait_max_ms,
            fetch_max_bytes=self.settings.replica_fetch_max_bytes,
            fetch_backoff_ms=self.settings.replica_fetch_backoff_ms,
            on_append=lambda: self._after_follower_append(part)).start()
        log.info("broker %d follows broker %d for %s-%d at leader epoch %d", self.broker_id, state.leader,
                 part.topic, part.partition, state.leader_epoch)

    async def _after_follower_append(self, part: LocalPartition) -> None:
        part.notify_high_watermark()
        try:  # compaction is an optimisation: a failure must not stop replication
            if part.log.needs_compaction(max_files=self.settings.log_segment_files_max):
                await asyncio.to_thread(part.log.compact_head,
                                        keep_newest=max(1, self.settings.log_segment_files_max // 4))
        except Exception:
            log.exception("compaction of %s-%d failed", part.topic, part.partition)

    def _after_leader_append(self, part: LocalPartition) -> None:
        """A group commit landed on the leader: wake the followers' fetches, maybe move the HW."""
        part.notify_log_end_offset()
        self._maybe_advance_high_watermark(part)

    # -- high watermark and ISR (leader) --------------------------------------------------------

    def _maybe_advance_high_watermark(self, part: LocalPartition) -> None:
        """HW = the smallest LEO in the ISR (the leader's own included); never moves back."""
        if part.role != "leader" or part.state is None:
            return
        leos = [part.log.log_end_offset]
        for b in part.state.isr:
            if b != self.broker_id:
                prog = part.progress.get(b)
                leos.append(prog.log_end_offset if prog is not None else -1)
        hw = min(leos)
        if hw >= 0 and part.log.advance_high_watermark(hw):
            part.notify_high_watermark()

    def record_follower_fetch(self, part: LocalPartition, replica_id: int, offset: int) -> None:
        """A follower fetched at ``offset``: it has every record below it (Kafka's updateFollowerFetchState).

        Its LEO becomes ``offset``; it is caught up now if ``offset`` reaches the leader's LEO, or was at
        its previous fetch if ``offset`` reaches the leader's LEO of then. Then maybe the HW moves, and
        an out-of-sync follower that reached the HW (and this epoch's start) goes back into the ISR.
        """
        now = _now_ms()
        prog = part.progress.setdefault(replica_id, ReplicaProgress(-1, now, now, 0))
        leo = part.log.log_end_offset
        if offset >= leo:
            prog.last_caught_up_ms = now
        elif offset >= prog.last_fetch_leader_leo:
            prog.last_caught_up_ms = max(prog.last_caught_up_ms, prog.last_fetch_ms)
        prog.last_fetch_leader_leo, prog.last_fetch_ms = leo, now
        prog.log_end_offset = offset
        isr = part.isr
        if (replica_id not in isr and offset >= part.log.high_watermark and offset >= part.epoch_start_offset
                and self._loop is not None):
            self._schedule_isr_update(part, add={replica_id})
        self._maybe_advance_high_watermark(part)

    def _schedule_isr_update(self, part: LocalPartition, *, add: set[int] = frozenset(),
                             remove: set[int] = frozenset()) -> None:
        if part.isr_update_running:
            return
        part.isr_update_running = True
        asyncio.get_running_loop().create_task(self._update_isr(part, add=set(add), remove=set(remove)))

    async def _update_isr(self, part: LocalPartition, *, add: set[int], remove: set[int]) -> None:
        """Write the leader's new ISR to ZooKeeper (compare-and-set; re-read and retry on a race)."""
        try:
            for _ in range(10):
                async with part.lock:
                    state = part.state
                    if part.role != "leader" or state is None or state.leader != self.broker_id:
                        return
                    isr = [b for b in part.replicas if (b in state.isr or b in add) and b not in remove]
                    if self.broker_id not in isr:
                        isr.insert(0, self.broker_id)
                    if sorted(isr) == sorted(state.isr):
                        return
                    new = replace(state, isr=isr)
                    try:
                        written = await asyncio.to_thread(self.metadata.set_partition_state, part.topic,
                                                          part.partition, new)
                    except BadVersionError:
                        fresh = await self.partition_state(part.topic, part.partition)
                        if fresh.leader != self.broker_id or fresh.leader_epoch != part.leader_epoch:
                            return  # deposed: the watch makes us a follower
                        part.state = fresh
                        continue
                    log.info("%s-%d: ISR %s -> %s", part.topic, part.partition, state.isr, isr)
                    part.state = written
                    now = _now_ms()
                    for b in add:  # a re-admitted follower starts a fresh lag clock
                        if b in part.progress:
                            part.progress[b].last_caught_up_ms = max(part.progress[b].last_caught_up_ms, now)
                    self._maybe_advance_high_watermark(part)
                    part.notify_high_watermark()
                    return
        except Exception:
            log.exception("ISR update of %s-%d failed", part.topic, part.partition)
        finally:
            part.isr_update_running = False

    async def _isr_expiration_loop(self) -> None:
        """Every ``replica.lag.time.max.ms / 2``: followers that have not caught up for that long leave the ISR."""
        lag_ms = self.settings.replica_lag_time_max_ms
        interval_s = min(max(lag_ms / 2000.0, 0.05), 5.0)
        while not self._stopping:
            await asyncio.sleep(interval_s)
            now = _now_ms()
            for part in list(self._partitions.values()):
                if part.role != "leader" or part.state is None:
                    continue
                out = {b for b in part.state.isr if b != self.broker_id
                       and now - part.progress.get(b, ReplicaProgress()).last_caught_up_ms > lag_ms}
                if out:
                    log.info("%s-%d: followers %s have not caught up for %d ms", part.topic, part.partition,
                             sorted(out), lag_ms)
                    self._schedule_isr_update(part, remove=out)

    # -- replica fetch (leader side) ------------------------------------------------------------

    async def replica_leader(self, topic: str, partition: int, replica_id: int, leader_epoch: int) -> LocalPartition:
        """The leader's partition for a follower's request at ``leader_epoch``.

        Raises:
            NotLeaderError / LeaderNotAvailableError: this broker does not lead the partition.
            FencedLeaderEpochError: the follower's epoch is older (it has not seen the new state yet).
            UnknownLeaderEpochError: the follower's epoch is newer than this leader's (deposed leader).
            UnknownPartitionError: ``replica_id`` is not a replica of the partition.
        """
        part = await self.leader_partition(topic, partition)
        if leader_epoch < part.leader_epoch:
            raise FencedLeaderEpochError(f"Leader epoch {leader_epoch} of broker {replica_id} is older than "
                                         f"{part.leader_epoch} for {topic}-{partition}.")
        if leader_epoch > part.leader_epoch:
            raise UnknownLeaderEpochError(f"Leader epoch {leader_epoch} is newer than this leader's "
                                          f"{part.leader_epoch} for {topic}-{partition}.")
        if replica_id not in part.replicas or replica_id == self.broker_id:
            raise UnknownPartitionError(topic, partition, len(self.topic(topic).replicas))
        return part

    async def replica_fetch(self, topic: str, partition: int, *, replica_id: int, leader_epoch: int, offset: int,
                            max_bytes: int, max_wait_ms: int) -> tuple[pa.Table, LocalPartition]:
        """A follower's fetch: full log rows from ``offset`` up to the LEO (not the HW), long-polling.

        Raises:
            the errors of :meth:`replica_leader`; OffsetOutOfRangeError when ``offset`` is beyond the
            leader's LEO (the follower truncates) or below its log start offset.
        """
        part = await self.replica_leader(topic, partition, replica_id, leader_epoch)
        if offset > part.log.log_end_offset:
            raise OffsetOutOfRangeError(topic=topic, partition=partition, offset=offset,
                                        log_start_offset=part.log.log_start_offset,
                                        high_watermark=part.log.log_end_offset)
        self.record_follower_fetch(part, replica_id, offset)
        leo = part.log.log_end_offset
        if offset >= leo and max_wait_ms > 0:
            await part.wait_for_log_end(offset, max_wait_ms / 1000.0)
        table = await asyncio.to_thread(part.log.read, offset, max_bytes=max_bytes,
                                        end_offset=part.log.log_end_offset)
        return table, part

    async def replica_epoch_end_offset(self, topic: str, partition: int, *, replica_id: int, leader_epoch: int,
                                       epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch: ``(largest epoch <= epoch, its end offset)`` in the leader's log."""
        part = await self.replica_leader(topic, partition, replica_id, leader_epoch)
        return part.log.end_offset_for_epoch(epoch)

    # -- admin ----------------------------------------------------------------------------------

    async def create_topic(self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
                           configs: dict[str, str] | None = None) -> TopicMetadata:
        """Create a topic in ZooKeeper (replicas spread as Kafka does) and open the logs this broker leads.

        ``partitions`` defaults to ``num.partitions``, ``replication_factor`` to
        ``default.replication.factor``; ``max.message.bytes`` defaults to ``message.max.bytes``.

        Raises:
            the errors of :meth:`ClusterMetadata.create_topic` (InvalidReplicationFactorError when the
            replication factor exceeds the live brokers).
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

    async def produce(self, topic: str, partition: int, records: pa.Table, *, acks: str = "all") -> int:
        """Append a normalised, already validated produce batch; return the offset of its first record.

        ``acks`` (Kafka's producer ``acks``):

        - ``"0"``: queue the batch and answer at once with -1 (no offset known, no error reported);
        - ``"1"``: answer once the leader committed the batch to its own Delta table;
        - ``"all"``: refuse before writing when the ISR is smaller than ``min.insync.replicas``; answer
          once the high watermark passed the batch (every ISR member has it), within
          ``request.timeout.ms``.

        Raises:
            NotLeaderError, LeaderNotAvailableError: this broker does not lead the partition (or stopped
                leading it before the batch was committed).
            NotEnoughReplicasError: ``acks=all`` with an ISR smaller than ``min.insync.replicas``
                (nothing written).
            NotEnoughReplicasAfterAppendError: written, but the ISR fell below ``min.insync.replicas``.
            RequestTimedOutError: written, but not committed within ``request.timeout.ms``.
            CommitFailedError, FencedLeaderEpochError: the leader's own commit failed.
        """
        part = await self.leader_partition(topic, partition)
        if acks == "all":
            min_isr = part.log.config.min_insync_replicas
            if len(part.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"{topic}-{partition} has {len(part.isr)} in-sync replica(s) {part.isr}, fewer than "
                    f"min.insync.replicas={min_isr}; nothing was written.")
        if acks == "0":
            task = asyncio.get_running_loop().create_task(part.committer.append(records))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            return -1
        epoch = part.leader_epoch
        base = await part.committer.append(records)
        if acks == "all":
            await self._wait_for_commit(part, epoch, base + records.num_rows)
        return base

    async def _wait_for_commit(self, part: LocalPartition, epoch: int, end_offset: int) -> None:
        """Wait until the HW reaches ``end_offset`` while this broker still leads at ``epoch`` (acks=all)."""
        min_isr = part.log.config.min_insync_replicas

        def leading() -> bool:
            return part.role == "leader" and part.leader_epoch == epoch

        await part.wait_until(lambda: not leading() or part.log.high_watermark >= end_offset,
                              self.settings.request_timeout_ms / 1000.0)
        if not leading():
            raise NotLeaderError(
                f"Broker {self.broker_id} stopped leading {part.topic}-{part.partition} before the batch "
                f"ending at offset {end_offset} was committed; it may or may not be in the log.")
        if part.log.high_watermark >= end_offset:
            if len(part.isr) < min_isr:
                raise NotEnoughReplicasAfterAppendError(
                    f"{part.topic}-{part.partition}: the batch is committed by the ISR {part.isr}, fewer than "
                    f"min.insync.replicas={min_isr}.")
            return
        if len(part.isr) < min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"{part.topic}-{part.partition}: the batch ending at {end_offset} did not reach "
                f"min.insync.replicas={min_isr} in request.timeout.ms={self.settings.request_timeout_ms}.")
        raise RequestTimedOutError(
            f"{part.topic}-{part.partition}: the high watermark did not pass offset {end_offset - 1} in "
            f"request.timeout.ms={self.settings.request_timeout_ms}.")

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
