"""The schema registry of one broker: its view of ``_schemas``, and writes through the topic's one writer.

Confluent Schema Registry keeps its schemas in the compacted topic ``_schemas``; every instance follows
the topic into memory and answers reads from there, and one instance, the primary, writes (so schema ids
are unique). lakelog does the same with the brokers themselves:

- **The topic**: ``_schemas``, one partition, ``cleanup.policy=compact``, 3 replicas capped at the live
  brokers (Confluent's ``kafkastore.topic.replication.factor``), ``min.insync.replicas`` 2 capped at the
  replicas - 1; created by the first write.
- **The view**: every broker watches ``_schemas``' znode and, once it exists, follows ``_schemas-0`` from
  offset 0 into a
  :class:`~lakelog.schemas.registry_state.RegistryView`: from its own log while it leads the partition,
  else by fetching from the leader (long polls, below the high watermark), for as long as it runs.
- **The writer** (Confluent's primary): the leader of ``_schemas-0``. Steps of :meth:`SchemaRegistry.write_local`:
  1. under the write lock, wait until the view holds the whole log (everything up to the log end
  offset); 2. decide from the view (:func:`~lakelog.schemas.registry_writes.decide`: ids = the largest + 1,
  compatibility checks); 3. append the records with ``acks=all``; 4. wait until the view folded them and
  answer. A broker that does not lead the partition forwards the command to the leader through the leader
  client (:meth:`~lakelog.replication.leader_client.LeaderClient.schema_registry_write`), sends it again
  while the leader moves, and answers once its own view reached the write's offset (read-your-writes, as
  Confluent's instances wait for their reader to reach a write's offset).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import pyarrow as pa

from lakelog.config import BrokerSettings
from lakelog.coordinators.coordinator_partitions import (
    CoordinatorPartitions,
    InternalTopic,
    capped_min_isr,
    retry_while_moving,
)
from lakelog.coordinators.partition_writer import PartitionWriter
from lakelog.errors import LakelogError, NotCoordinatorError, NotLeaderError, OffsetOutOfRangeError
from lakelog.errors.schemas import SchemaRegistryTimeoutError
from lakelog.log_tables.records import normalize_produce_batch
from lakelog.replication.consumer_fetch import next_offset
from lakelog.replication.leader_client import LeaderClient
from lakelog.replication.metadata import TopicMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.replica_manager import ReplicaManager
from lakelog.schemas.registry_state import RegistryView
from lakelog.schemas.registry_writes import decide

log = logging.getLogger(__name__)

__all__ = ["SCHEMAS_TOPIC", "SchemaRegistry"]

#: Confluent's ``kafkastore.topic``.
SCHEMAS_TOPIC = "_schemas"
#: Confluent's ``kafkastore.topic.replication.factor`` (capped at the live brokers when it is created).
SCHEMAS_TOPIC_REPLICATION_FACTOR = 3
#: How long a follow fetch waits for new records at the leader.
FOLLOW_WAIT_MS = 500
#: Arrow bytes a follow fetch reads at most.
FOLLOW_BYTES = 4 * 1024 * 1024
_COLUMNS = ["offset", "key", "value"]
#: The key every write is routed by (one partition: any key leads to partition 0).
_WRITER_KEY = "schemas"


class SchemaRegistry:
    """The registry's storage on one broker (see the module docstring).

    Args:
        settings: ``broker.id``, ``request.timeout.ms`` (how long a write waits for the writer and the view).
        cache: topic metadata and live brokers.
        writer: the local replicas (appends to ``_schemas-0`` while leading it, its log offsets).
        replica_manager: this broker's reads of ``_schemas-0`` while it leads the partition.
        leader_client: fetches from the leader and forwarded writes.
        create_topic: creates a topic (``Broker.create_topic``).

    Call :meth:`start` inside the serving event loop, :meth:`stop` at the end.
    """

    def __init__(self, settings: BrokerSettings, *, cache: MetadataCache, writer: PartitionWriter,
                 replica_manager: ReplicaManager, leader_client: LeaderClient,
                 create_topic: Callable[..., Awaitable[TopicMetadata]]) -> None:
        self.settings = settings
        self.writer = writer
        self.replica_manager = replica_manager
        self.leader_client = leader_client
        topic = InternalTopic(
            SCHEMAS_TOPIC, num_partitions=1, replication_factor=SCHEMAS_TOPIC_REPLICATION_FACTOR,
            replication_factor_key="kafkastore.topic.replication.factor",
            min_isr=lambda rf: capped_min_isr(rf, min_isr=2), keys="schemas",
            missing=f"{SCHEMAS_TOPIC} does not exist yet: no schema was registered.")
        #: the topic's creation and its leader (its partitions are not loaded: every broker follows them)
        self.partitions: CoordinatorPartitions[RegistryView] = CoordinatorPartitions(
            topic, broker_id=settings.broker_id, cache=cache, writer=writer, create_topic=create_topic,
            new_state=RegistryView, fold=lambda view, rows: 0)
        #: everything ``_schemas`` holds up to ``view.next_offset``
        self.view = RegistryView()
        self._lock = asyncio.Lock()
        self._moved = asyncio.Event()  # set (and replaced) whenever the view moves on: _signal
        self._follower: asyncio.Task | None = None
        self._leader_url: str | None = None  # the leader of _schemas-0 when it is another broker
        self._topic_seen = False  # whether _schemas' znode exists (its DataWatch)
        self._stopped = False
        #: whether the view has caught up with ``_schemas`` once since the broker started (a read that found
        #: nothing new, or no such topic): before, an unknown schema id may just not be read yet
        self.caught_up = False

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Watch ``_schemas``' znode (a kazoo ``DataWatch``: no polling while the topic does not exist) and
        start following the topic (a task of the running event loop)."""
        loop = asyncio.get_running_loop()

        def on_topic_znode(data: bytes | None, stat: object) -> bool | None:  # kazoo's thread
            if self._stopped or loop.is_closed():
                return False  # kazoo drops the watch
            loop.call_soon_threadsafe(self._topic_changed, data is not None)
            return None

        metadata = self.partitions.cache.metadata
        await asyncio.to_thread(metadata.zk.DataWatch, metadata.topic_path(SCHEMAS_TOPIC), on_topic_znode)
        self._follower = loop.create_task(self._follow(), name="schemas-follower")

    def _topic_changed(self, exists: bool) -> None:
        """``_schemas``' znode was created or deleted (in the event loop)."""
        if self._topic_seen and not exists:
            log.warning("%s was deleted: this broker's view of the schema registry is emptied", SCHEMAS_TOPIC)
            self.view = RegistryView()
        self._topic_seen = exists
        if not exists:
            self.caught_up = True  # no schema was ever registered: nothing to read
        self._signal()

    async def stop(self) -> None:
        """Stop following (and watching the topic's znode)."""
        self._stopped = True
        if self._follower is not None:
            self._follower.cancel()
            try:
                await self._follower
            except (asyncio.CancelledError, Exception):
                pass

    # -- the view ---------------------------------------------------------------------------------

    async def _follow(self) -> None:
        """Fold ``_schemas-0`` into the view for as long as the broker runs; errors are retried."""
        while True:
            try:
                if not self._topic_seen:
                    await self._wait_moved(5.0)  # woken by the topic's DataWatch
                    continue
                if not await self.partitions.topic_exists():  # created, its metadata not readable yet
                    await asyncio.sleep(0.2)
                    continue
                rows, end = await self._read(self.view.next_offset)
                if rows.num_rows or end > self.view.next_offset:
                    self.view.fold(rows, next_offset=end)
                    self._signal()
                elif not self.caught_up:  # a (long-polling) read found nothing more: the view is current
                    self.caught_up = True
                    self._signal()
            except asyncio.CancelledError:
                raise
            except OffsetOutOfRangeError:
                log.warning("_schemas: offset %d is out of range; reading the topic again from its start",
                            self.view.next_offset)
                self.view = RegistryView()
                self._signal()
            except LakelogError as e:
                log.debug("following _schemas: %s; retrying", e)
                await asyncio.sleep(0.2)
            except Exception:
                log.exception("following _schemas failed; retrying")
                await asyncio.sleep(1.0)

    async def _read(self, offset: int) -> tuple[pa.Table, int]:
        """Records of ``_schemas-0`` from ``offset`` below the high watermark, and where the next read starts:
        from the local log while this broker leads the partition, else from the leader (long polls; the
        leader's URL is kept until a read from it fails)."""
        if self._leader_url is not None:
            try:
                rows = await self.leader_client.fetch(self._leader_url, SCHEMAS_TOPIC, 0, offset=offset,
                                                      max_bytes=FOLLOW_BYTES, max_wait_ms=FOLLOW_WAIT_MS)
                return rows.select([c for c in _COLUMNS if c in rows.column_names]), next_offset(rows, offset)
            except LakelogError:
                self._leader_url = None  # moved (or down): find the leader again
                raise
        try:
            rows, part = await self.replica_manager.fetch(SCHEMAS_TOPIC, 0, offset, max_bytes=FOLLOW_BYTES,
                                                          max_wait_ms=FOLLOW_WAIT_MS, columns=_COLUMNS)
        except NotLeaderError as e:
            if not e.leader_url:
                raise
            self._leader_url = e.leader_url
            return await self._read(offset)
        end = next_offset(rows, offset)
        if rows.num_rows == 0 and part.log.high_watermark > end:
            end = part.log.high_watermark  # a gap left by compaction reaches the high watermark
        return rows, end

    def _signal(self) -> None:
        """Wake everything waiting for the view (or the topic) to move."""
        self._moved.set()
        self._moved = asyncio.Event()

    async def _wait_moved(self, timeout_s: float) -> None:
        """Wait for the next :meth:`_signal`, up to ``timeout_s``."""
        try:
            await asyncio.wait_for(self._moved.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass

    async def wait_caught_up(self, *, timeout_ms: int | None = None) -> None:
        """Return once the view has caught up with ``_schemas`` since the broker started (:attr:`caught_up`):
        schema validation waits for it, so a record is never refused for a schema id not read yet.

        Raises:
            SchemaRegistryTimeoutError: 500 / 50002 (retriable) after ``timeout_ms`` (``request.timeout.ms``).
        """
        if not await self._wait_until(lambda: self.caught_up, timeout_ms or self.settings.request_timeout_ms):
            raise SchemaRegistryTimeoutError(
                f"Broker {self.settings.broker_id} has not read {SCHEMAS_TOPIC} since it started (at offset "
                f"{self.view.next_offset} so far), so it cannot validate schema'd records yet; retry.")

    async def wait_for_schema_ids(self, subject: str, schema_ids: set[int], *, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms`` for the view to hold every id of ``schema_ids`` as a live version of
        ``subject`` (registered through another broker a moment ago, say); whether it does."""
        return await self._wait_until(lambda: schema_ids <= {v.schema_id for v in self.view.versions(subject)},
                                      timeout_ms)

    async def wait_for_offset(self, offset: int, *, timeout_ms: int | None = None) -> None:
        """Return once the view holds every record below ``offset`` (read-your-writes).

        Raises:
            SchemaRegistryTimeoutError: 500 / 50002 (retriable) after ``timeout_ms`` (``request.timeout.ms``).
        """
        if not await self._wait_until(lambda: self.view.next_offset >= offset,
                                      timeout_ms or self.settings.request_timeout_ms):
            raise SchemaRegistryTimeoutError(
                f"Broker {self.settings.broker_id}'s view of {SCHEMAS_TOPIC} is at offset {self.view.next_offset}, "
                f"short of {offset}; retry.")

    async def _wait_until(self, done: Callable[[], bool], timeout_ms: int) -> bool:
        """Wait until ``done()`` (checked whenever the view moves, and every 0.5 s), at most ``timeout_ms``;
        whether it came true."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await self._wait_moved(min(left, 0.5))
        return True

    # -- writes -----------------------------------------------------------------------------------

    async def write(self, command: dict) -> object:
        """Carry out a write command (:mod:`lakelog.schemas.registry_writes`) on the registry's writer, the
        leader of ``_schemas-0`` wherever it is, and answer once this broker's view holds it. The topic is
        created on the first write.

        Raises:
            The decision's errors (:mod:`lakelog.errors.schemas`); NotCoordinatorError, LeaderNotAvailableError
            (retriable) when no leader answered within ``request.timeout.ms``; the append's errors;
            SchemaRegistryTimeoutError.
        """
        async def call() -> tuple[object, int]:
            url = await self.partitions.coordinator_url(_WRITER_KEY, what="the schema registry's writes",
                                                        create=True)
            if url is None:
                return await self.write_local(command)
            answer = await self.leader_client.schema_registry_write(url, command)
            return answer["result"], int(answer["offset"])

        result, offset = await retry_while_moving(call, timeout_ms=self.settings.request_timeout_ms)
        await self.wait_for_offset(offset)
        return result

    async def write_local(self, command: dict) -> tuple[object, int]:
        """Carry out a write command as the registry's writer: ``(answer, the offset after its records)``.
        The steps of the module docstring.

        Raises:
            NotCoordinatorError (retriable): this broker does not lead ``_schemas-0``; the decision's errors;
            the append's errors; SchemaRegistryTimeoutError.
        """
        async with self._lock:
            # 1. the view holds the whole log
            part = self.writer.role(SCHEMAS_TOPIC, 0)
            if part is None or not part.is_leader:
                raise NotCoordinatorError(f"Broker {self.settings.broker_id} does not lead {SCHEMAS_TOPIC}-0, the "
                                          "schema registry's writer; retry.")
            await self.wait_for_offset(self.writer.log_offsets(SCHEMAS_TOPIC, 0)[1])
            # 2. decide (off the event loop: a Protobuf schema new to this broker runs protoc, ~0.2 s)
            records, result = await asyncio.to_thread(decide, self.view, command)
            if not records:
                return result, self.view.next_offset
            # 3. append with acks=all
            table = pa.table({"key": pa.array([k for k, _ in records], pa.binary()),
                              "value": pa.array([v for _, v in records], pa.binary())})
            base = await self.writer.append(SCHEMAS_TOPIC, 0, normalize_produce_batch(table))
            end = base + len(records)
            # 4. the view folded them
            await self.wait_for_offset(end)
            log.info("schema registry: %s of %r written at %s-0 offset %d", command.get("op"),
                     command.get("subject"), SCHEMAS_TOPIC, base)
            return result, end
