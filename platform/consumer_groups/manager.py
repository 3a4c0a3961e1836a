"""The consumer instances of one broker: REST Proxy v2's ``KafkaConsumerManager`` for lakelog.

:class:`ConsumerManager` owns the broker's :class:`~lakelog.consumer_groups.instances.ConsumerInstance`
objects and does, for the HTTP routes of :mod:`lakelog.ingest_api.consumers_api`: instance creation
and deletion, subscription (topics or a pattern) and manual assignment, seeks, reads (long-poll over
the owned partitions), offset commits (to the broker's transactional ``__consumer_offsets`` store,
fenced by the group generation) and expiry after ``consumer.instance.timeout.ms`` without requests.

Group membership and rebalancing go through ZooKeeper (:mod:`lakelog.consumer_groups.membership`,
whose docstring gives the revoke-before-assign protocol); :meth:`ConsumerManager._reconcile` runs its
steps 1-3 for the local members of a group whenever a ZooKeeper watch or a local change asks for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.consumer_groups.assignors import TopicPartition, get_assignor
from lakelog.consumer_groups.errors import (
    ConsumerAlreadyExistsError,
    ConsumerAlreadySubscribedError,
    ConsumerInstanceNotFoundError,
    IllegalConsumerStateError,
    IllegalGenerationError,
    InvalidConsumerConfigError,
)
from lakelog.consumer_groups.instances import ConsumerInstance
from lakelog.consumer_groups.membership import GroupMembership, GroupWatch
from lakelog.ingest_api import codecs
from lakelog.log_tables.errors import OffsetOutOfRangeError
from lakelog.replication.errors import LeaderNotAvailableError, NotLeaderError, UnknownTopicError
from lakelog.replication.metadata import TOPICS_PATH

log = logging.getLogger(__name__)

#: Kafka consumer's ``max.partition.fetch.bytes`` default: bytes read per partition per records request.
MAX_PARTITION_FETCH_BYTES = 1024 * 1024

#: A records round with more rows than this is encoded off the event loop (one thread hop per round).
ENCODE_INLINE_MAX_ROWS = 500

#: Partitions a records request skips for this round (logged), as a Kafka consumer's poll does.
_SKIPPABLE_READ_ERRORS = (NotLeaderError, LeaderNotAvailableError, UnknownTopicError)


class _LocalGroup:
    """Bookkeeping of a group with subscribed members on this broker."""

    def __init__(self, watch: GroupWatch) -> None:
        self.watch = watch
        self.dirty = False
        self.running = False


class ConsumerManager:
    """The consumer instances of one broker and their groups.

    Args:
        broker: the :class:`lakelog.broker.Broker` (started) whose logs, ZooKeeper session and offset
            store the instances use.
        instance_timeout_ms: ``consumer.instance.timeout.ms``: an instance without requests for this
            long is deleted (its partitions go to the other members).
        default_assignor: ``partition.assignment.strategy`` of instances that name none.

    Call :meth:`start` and :meth:`stop` in the broker's event loop.
    """

    def __init__(self, broker, *, instance_timeout_ms: int = 300_000, default_assignor: str = "range") -> None:
        self.broker = broker
        self.instance_timeout_ms = instance_timeout_ms
        self.default_assignor = get_assignor(default_assignor).name
        self.membership = GroupMembership(broker.zk, partition_counts=self._partition_counts,
                                          default_assignor=self.default_assignor)
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._groups: dict[str, _LocalGroup] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiry_task: asyncio.Task | None = None
        self._stopping = False

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the expiry task and the topic watch (pattern subscriptions, partition counts)."""
        self._loop = asyncio.get_running_loop()
        self._expiry_task = asyncio.create_task(self._expire_loop(), name="consumer-instance-expiry")
        self.broker.zk.ChildrenWatch(TOPICS_PATH, self._on_topics_changed)

    async def stop(self) -> None:
        """Close every instance (auto commit, leave its group), stop the background task."""
        self._stopping = True
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for inst in list(self._instances.values()):
            try:
                await self.delete(inst.group, inst.name)
            except Exception:
                log.exception("closing consumer instance %s/%s failed", inst.group, inst.name)

    @property
    def base_url(self) -> str:
        return self.broker.settings.advertised_url

    # -- instances ------------------------------------------------------------------------------

    async def create(self, group: str, *, name: str, format: str = "binary", auto_offset_reset: str = "latest",
                     auto_commit: bool = True, fetch_min_bytes: int = 1, request_timeout_ms: int = 1000,
                     assignor: str | None = None) -> ConsumerInstance:
        """Create instance ``name`` of ``group`` (REST Proxy ``POST /consumers/{group}``).

        Raises:
            ConsumerAlreadyExistsError: the name is taken in the group, on any broker (409 / 40902).
            InvalidConsumerConfigError: a bad format, reset policy or assignor (422 / 42204).
        """
        if format not in ("binary", "json"):
            raise InvalidConsumerConfigError(f"Invalid consumer configuration: format {format!r} is not supported; "
                                             f"use binary or json.")
        if auto_offset_reset not in ("earliest", "latest"):
            raise InvalidConsumerConfigError(f"Invalid consumer configuration: auto.offset.reset "
                                             f"{auto_offset_reset!r}; use earliest or latest.")
        chosen = get_assignor(assignor).name if assignor else self.default_assignor
        if (group, name) in self._instances:
            raise ConsumerAlreadyExistsError(
                f"Consumer with specified consumer ID already exists in the specified consumer group: "
                f"instance '{name}' of group '{group}'.")
        inst = ConsumerInstance(group=group, name=name, format=format, auto_offset_reset=auto_offset_reset,  # type: ignore[arg-type]
                                auto_commit=auto_commit, fetch_min_bytes=fetch_min_bytes,
                                request_timeout_ms=request_timeout_ms, assignor=chosen)
        self._instances[(group, name)] = inst
        try:
            await asyncio.to_thread(self.membership.register_instance, group, name,
                                    broker_id=self.broker.broker_id, base_uri=self.base_url)
        except BaseException:
            self._instances.pop((group, name), None)
            raise
        return inst

    def get(self, group: str, name: str) -> ConsumerInstance:
        """The live instance (its expiry clock restarts). Raises :class:`ConsumerInstanceNotFoundError`."""
        inst = self._instances.get((group, name))
        if inst is None or inst.closed:
            raise ConsumerInstanceNotFoundError(
                f"Consumer instance not found: '{name}' in group '{group}' does not exist on broker "
                f"{self.broker.broker_id} (deleted, expired after consumer.instance.timeout.ms="
                f"{self.instance_timeout_ms}, or created on another broker: use its base_uri).")
        inst.touch()
        return inst

    def instances(self, group: str | None = None) -> list[ConsumerInstance]:
        """The live instances of this broker (of one group)."""
        return [i for (g, _), i in sorted(self._instances.items()) if group is None or g == group]

    async def delete(self, group: str, name: str) -> None:
        """Close an instance: auto commit, leave the group, release the name (REST Proxy ``DELETE``).

        Raises:
            ConsumerInstanceNotFoundError.
        """
        inst = self.get(group, name)
        self._instances.pop((group, name), None)  # gone for requests from now on
        try:
            await self._unsubscribe(inst)
        finally:
            inst.closed = True
            await asyncio.to_thread(self.membership.unregister_instance, group, name)

    # -- subscription and assignment ------------------------------------------------------------

    async def subscribe(self, inst: ConsumerInstance, *, topics: list[str] | None = None,
                        pattern=None) -> None:
        """Subscribe to ``topics`` or to the topics a compiled ``pattern`` matches (now and later).

        Subscribing again to the same topics is a no-op.

        Raises:
            IllegalConsumerStateError: the instance has a manual assignment (409 / 40903).
            ConsumerAlreadySubscribedError: it is subscribed to something else (409 / 40901).
        """
        if inst.manual:
            raise IllegalConsumerStateError("Illegal state: Subscription to topics, partitions and pattern are "
                                            "mutually exclusive; this instance has a manual assignment.")
        same = (inst.topics is not None and topics is not None and sorted(set(inst.topics)) == sorted(set(topics))) or \
               (inst.pattern is not None and pattern is not None and inst.pattern.pattern == pattern.pattern)
        if same:
            return
        if inst.subscribed:
            current = inst.pattern.pattern if inst.pattern is not None else ", ".join(inst.topics or [])
            raise ConsumerAlreadySubscribedError(
                f"Consumer cannot subscribe to the specified target because it has already subscribed to other "
                f"topics ({current}); delete the subscription first.")
        inst.topics = sorted(set(topics)) if topics is not None else None
        inst.pattern = pattern
        await self._join(inst)

    async def _join(self, inst: ConsumerInstance) -> None:
        all_topics = await asyncio.to_thread(self.broker.metadata.topics) if inst.pattern is not None else []
        await asyncio.to_thread(self.membership.join, inst.group, inst.name, topics=inst.matching_topics(all_topics),
                                assignor=inst.assignor, broker_id=self.broker.broker_id, base_uri=self.base_url)
        if inst.group not in self._groups:
            self._groups[inst.group] = _LocalGroup(
                await asyncio.to_thread(self.membership.watch, inst.group, lambda g=inst.group: self._schedule(g)))
        self._kick(inst.group)

    async def subscription_topics(self, inst: ConsumerInstance) -> list[str]:
        """The topics of the subscription (pattern: the existing topics it matches)."""
        all_topics = await asyncio.to_thread(self.broker.metadata.topics) if inst.pattern is not None else []
        return inst.matching_topics(all_topics)

    async def unsubscribe(self, inst: ConsumerInstance) -> None:
        """Drop the subscription or manual assignment (Kafka's ``unsubscribe``), committing first with auto commit."""
        await self._unsubscribe(inst)

    async def _unsubscribe(self, inst: ConsumerInstance) -> None:
        group = inst.group
        was_member = inst.subscribed
        # revoke everything; with auto commit the positions are committed before leaving
        generation = inst.generation
        positions = inst.revoke(set(inst.owned) | set(inst.pending))
        try:
            if inst.auto_commit and positions:
                await self._commit_quietly(inst, positions, generation)
        finally:
            inst.topics, inst.pattern, inst.manual = None, None, False
            inst.generation = inst.acked_generation = None
            if was_member:
                # leave even if the commit failed: a member that stays would never ack and stall the group
                await asyncio.to_thread(self.membership.leave, group, inst.name)
                if not any(i.subscribed for i in self.instances(group)):
                    local = self._groups.pop(group, None)
                    if local is not None:
                        local.watch.stop()
        if was_member:
            # the leaving broker starts the next generation right away (the others also see the watch)
            await asyncio.to_thread(self.membership.rebalance, group)

    async def assign(self, inst: ConsumerInstance, partitions: list[TopicPartition]) -> None:
        """Manual assignment (Kafka's ``assign``): read exactly these partitions, outside group membership.

        An empty list is an unsubscribe. Raises :class:`IllegalConsumerStateError` when subscribed,
        :class:`UnknownTopicError` / ``UnknownPartitionError`` for partitions that do not exist.
        """
        if inst.subscribed:
            raise IllegalConsumerStateError("Illegal state: Subscription to topics, partitions and pattern are "
                                            "mutually exclusive; this instance is subscribed.")
        wanted = set(partitions)
        for t, p in sorted(wanted):
            meta = await self.broker.topic_fresh(t)
            self.broker.check_partition(meta, p)
        positions = inst.revoke(inst.owned - wanted)
        if inst.auto_commit and positions:
            await self._commit_quietly(inst, positions, inst.generation)
        inst.manual = bool(wanted)
        inst.activate(await self._initial_positions(inst, wanted - inst.owned))

    # -- rebalancing ----------------------------------------------------------------------------

    def _schedule(self, group: str) -> None:
        """From kazoo's thread: run the group's reconciliation in the event loop."""
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self._kick, group)

    def _kick(self, group: str) -> None:
        local = self._groups.get(group)
        if local is None:
            return
        local.dirty = True
        if not local.running:
            local.running = True
            asyncio.ensure_future(self._reconcile_loop(group, local))

    async def _reconcile_loop(self, group: str, local: _LocalGroup) -> None:
        try:
            while local.dirty and self._groups.get(group) is local:
                local.dirty = False
                try:
                    await self._reconcile(group)
                except Exception:
                    log.exception("rebalance of group %s failed; retrying", group)
                    local.dirty = True
                    await asyncio.sleep(0.5)
        finally:
            local.running = False

    async def _reconcile(self, group: str) -> None:
        members = [i for i in self.instances(group) if i.subscribed]
        if not members:
            return
        # 1. compute: the stored assignment describes the live members (else generation n+1 is written)
        assignment = await asyncio.to_thread(self.membership.rebalance, group)
        if assignment is None:
            return
        for inst in members:
            if inst.closed or not inst.subscribed or inst.name not in assignment.members:
                continue  # joined after this generation was computed: the next one includes it
            if inst.acked_generation == assignment.generation:
                continue
            # 2. revoke what the member loses, commit it with auto commit, then ack the generation
            # (a failed ack is retried by the next pass: the generation counts as handled once acked)
            if inst.generation != assignment.generation:
                new = set(assignment.partitions_of(inst.name))
                positions = inst.revoke((inst.owned | inst.pending) - new)
                inst.generation = assignment.generation
                inst.pending = new - inst.owned
                if inst.auto_commit and positions:
                    await self._commit_quietly(inst, positions, assignment.generation)
                    if inst.closed or not inst.subscribed:
                        continue  # left the group meanwhile: nothing to ack
            await asyncio.to_thread(self.membership.acknowledge, group, inst.name, assignment.generation)
            if inst.generation == assignment.generation:
                inst.acked_generation = assignment.generation
        # 3. assign: gained partitions become readable once every member of the generation acked
        waiting = [i for i in members if i.generation == assignment.generation and i.pending and not i.closed]
        if waiting and await asyncio.to_thread(self.membership.all_acknowledged, group, assignment):
            for inst in waiting:
                gained = set(inst.pending)
                positions = await self._initial_positions(inst, gained)
                if not inst.closed and inst.generation == assignment.generation and inst.pending >= gained:
                    inst.activate(positions)

    def _on_topics_changed(self, children: list[str]) -> bool | None:
        # kazoo's thread: pattern subscriptions and partition counts may have changed
        if self._stopping:
            return False
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._refresh_subscriptions(), self._loop)
        return None

    async def _refresh_subscriptions(self) -> None:
        for inst in self.instances():
            if inst.pattern is not None and not inst.closed:
                await self._join(inst)  # updates the member's topics if the pattern matches new ones
        for group in list(self._groups):
            self._kick(group)

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        out = {}
        for t in topics:
            try:
                out[t] = self.broker.metadata.topic(t).partitions_count
            except UnknownTopicError:
                continue
        return out

    # -- expiry ---------------------------------------------------------------------------------

    async def _expire_loop(self) -> None:
        period_s = max(0.05, min(1.0, self.instance_timeout_ms / 4000.0))
        while True:
            await asyncio.sleep(period_s)
            now = time.monotonic()
            for inst in self.instances():
                if inst.idle_ms(now) > self.instance_timeout_ms and not inst.lock.locked():
                    log.info("consumer instance %s/%s expired after %d ms without requests", inst.group,
                             inst.name, self.instance_timeout_ms)
                    try:
                        await self.delete(inst.group, inst.name)
                    except ConsumerInstanceNotFoundError:
                        pass
                    except Exception:
                        log.exception("expiring consumer instance %s/%s failed", inst.group, inst.name)
            # safety net: a group whose members wait for acks is re-checked even if a watch was missed
            for group in list(self._groups):
                if any(i.pending for i in self.instances(group)):
                    self._kick(group)

    # -- positions ------------------------------------------------------------------------------

    async def _bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, high watermark) of each partition, from its leader (asked concurrently)."""
        tps = sorted(partitions)
        offsets = await asyncio.gather(*(self.broker.partition_offsets(*tp) for tp in tps))
        return {tp: (start, hw) for tp, (start, _, hw) in zip(tps, offsets)}

    async def _reset_position(self, inst: ConsumerInstance, tp: TopicPartition) -> int:
        start, _, hw = await self.broker.partition_offsets(*tp)
        return start if inst.auto_offset_reset == "earliest" else hw

    async def _initial_positions(self, inst: ConsumerInstance, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Committed offsets of the group, else ``auto.offset.reset`` (also for out-of-range commits)."""
        committed = {(c.topic, c.partition): c.offset for c in self.broker.offset_store.committed(inst.group)}
        out = {}
        for tp, (start, end) in (await self._bounds(partitions)).items():
            c = committed.get(tp)
            if c is not None and start <= c <= end:
                out[tp] = c
            else:
                out[tp] = start if inst.auto_offset_reset == "earliest" else end
        return out

    async def seek(self, inst: ConsumerInstance, offsets: dict[TopicPartition, int]) -> None:
        """Set positions (Kafka's ``seek``). Raises :class:`IllegalConsumerStateError` for unassigned partitions."""
        self._check_owned(inst, offsets)
        inst.positions.update(offsets)
        inst.notify()

    async def seek_to(self, inst: ConsumerInstance, partitions: list[TopicPartition], *, end: bool) -> None:
        """Seek to the log start offsets (``end=False``) or the high watermarks (``end=True``)."""
        self._check_owned(inst, partitions)
        for tp, (start, stop) in (await self._bounds(partitions)).items():
            inst.positions[tp] = stop if end else start
        inst.notify()

    @staticmethod
    def _check_owned(inst: ConsumerInstance, partitions: Iterable[TopicPartition]) -> None:
        missing = [tp for tp in partitions if tp not in inst.owned]
        if missing:
            t, p = missing[0]
            raise IllegalConsumerStateError(f"Illegal state: No current assignment for partition {t}-{p}.")

    # -- reads ----------------------------------------------------------------------------------

    async def records(self, inst: ConsumerInstance, *, timeout_ms: int | None = None,
                      max_bytes: int = 64 * 1024 * 1024) -> tuple[bytes, int | None]:
        """Read records of the owned partitions: a JSON array of REST Proxy v2 consumer records.

        Returns once the records' keys and values add up to ``fetch.min.bytes`` (default: any record)
        or after ``timeout_ms`` (default: the instance's ``consumer.request.timeout.ms``), with at most
        about ``max_bytes`` of keys and values, and about 1 MiB per partition (Kafka's
        ``max.partition.fetch.bytes``; at least one record). Positions advance past what is
        returned. With auto commit, positions are committed first every ``auto.commit.interval.ms``.

        Returns:
            ``(body, generation)``: the JSON array, and the group generation in which every returned
            record was read (None outside group membership). A rebalance during the request ends it
            with what was read before.

        Raises:
            IllegalConsumerStateError: neither subscribed nor assigned (409 / 40903).
        """
        if not inst.subscribed and not inst.manual:
            raise IllegalConsumerStateError("Illegal state: Consumer is not subscribed to any topics or "
                                            "assigned any partitions.")
        timeout_ms = inst.request_timeout_ms if timeout_ms is None else timeout_ms
        async with inst.lock:
            inst.touch()
            if inst.auto_commit_due():
                inst.last_auto_commit = time.monotonic()
                await self._commit_quietly(inst, inst.consumed_positions(), inst.generation)
            deadline = time.monotonic() + timeout_ms / 1000.0
            chunks: list[bytes] = []
            total = 0
            generation = inst.generation
            while inst.generation == generation:
                owned = sorted(inst.owned)
                if owned:
                    k = inst.rotation % len(owned)
                    owned = owned[k:] + owned[:k]
                    # Kafka's fetch limits: max.partition.fetch.bytes per partition within the request's max_bytes
                    budget = max(1, min(MAX_PARTITION_FETCH_BYTES, (max_bytes - total) // len(owned)))
                    starts = [inst.positions[tp] for tp in owned]
                    results = await asyncio.gather(*(self._read(inst, tp, off, budget) for tp, off in zip(owned, starts)),
                                                   return_exceptions=True)
                    if inst.generation != generation:
                        break  # rebalanced while reading: drop this round (positions stay), answer what we have
                    tables: list[tuple[TopicPartition, pa.Table]] = []
                    for tp, start, res in zip(owned, starts, results):
                        if isinstance(res, BaseException):
                            if not isinstance(res, _SKIPPABLE_READ_ERRORS):
                                raise res
                            log.warning("reading %s-%d for %s/%s: %s", tp[0], tp[1], inst.group, inst.name, res)
                            continue
                        table = res
                        # the assignment or a seek may have changed while reading: keep only current reads
                        if table is None or table.num_rows == 0 or tp not in inst.owned or inst.positions.get(tp) != start:
                            continue
                        inst.positions[tp] = int(table["offset"][-1].as_py()) + 1
                        total += _record_bytes(table)
                        tables.append((tp, table))
                    if sum(t.num_rows for _, t in tables) > ENCODE_INLINE_MAX_ROWS:
                        chunks.extend(await asyncio.to_thread(_encode_all, tables, inst.format))
                    else:
                        chunks.extend(_encode_all(tables, inst.format))
                remaining = deadline - time.monotonic()
                if total >= max(1, inst.fetch_min_bytes) or total >= max_bytes or remaining <= 0:
                    break
                await self._wait_for_records(inst, remaining)
            inst.rotation += 1
            inst.touch()
        return b"[" + b",".join(c[1:-1] for c in chunks if len(c) > 2) + b"]", generation

    async def _read(self, inst: ConsumerInstance, tp: TopicPartition, offset: int, max_bytes: int) -> pa.Table | None:
        try:
            try:
                table, _ = await self.broker.fetch(tp[0], tp[1], offset, max_bytes=max_bytes, max_wait_ms=0,
                                                   columns=codecs.FETCH_COLUMNS)
                return table
            except NotLeaderError as e:
                return await self._remote_read(tp, offset, max_bytes, e)
        except OffsetOutOfRangeError:
            # Kafka: an out-of-range position is reset by auto.offset.reset
            if tp in inst.owned and inst.positions.get(tp) == offset:
                inst.positions[tp] = await self._reset_position(inst, tp)
            return None

    async def _remote_read(self, tp: TopicPartition, offset: int, max_bytes: int, not_leader: NotLeaderError) -> pa.Table:
        """Read a partition led by another broker (the one ``not_leader`` names) through its gateway (Arrow IPC)."""
        if self.broker.http is None or not not_leader.leader_url:
            raise not_leader
        url = f"{not_leader.leader_url}/topics/{tp[0]}/partitions/{tp[1]}/records"
        try:
            resp = await self.broker.http.get(url, params={"offset": offset, "max_bytes": max_bytes, "max_wait_ms": 0},
                                              headers={"Accept": codecs.ARROW_STREAM})
        except httpx.HTTPError as e:
            raise LeaderNotAvailableError(f"The leader of {tp[0]}-{tp[1]} at {not_leader.leader_url} does not "
                                          f"answer ({type(e).__name__}); retry.") from None
        if resp.status_code != 200:
            try:
                body = resp.json()
            except ValueError:
                body = {}
            code = body.get("error_code") if isinstance(body, dict) else None
            # the fetch route answers 422 / 42202 only for an offset out of range (OffsetOutOfRangeError)
            if resp.status_code == OffsetOutOfRangeError.http_status and code == OffsetOutOfRangeError.error_code:
                raise OffsetOutOfRangeError(topic=tp[0], partition=tp[1], offset=offset, log_start_offset=-1,
                                            high_watermark=-1)
            if resp.status_code == NotLeaderError.http_status:  # leadership moved again
                raise NotLeaderError(body.get("message"), leader_id=body.get("leader_id"),
                                     leader_url=body.get("leader_url"))
            if code == UnknownTopicError.error_code:
                raise UnknownTopicError(tp[0])
            resp.raise_for_status()
        return pa.ipc.open_stream(resp.content).read_all()

    async def _wait_for_records(self, inst: ConsumerInstance, timeout_s: float) -> None:
        """Wait until an owned local partition has records past its position, the assignment or a
        position changes, or ``timeout_s`` passes (remote partitions are polled every 100 ms)."""
        waits = [asyncio.ensure_future(inst.changed.wait())]
        remote = False
        for tp in sorted(inst.owned):
            part = self.broker.local_partition(*tp)  # no I/O: led elsewhere (or not yet known here) is polled
            if part is None or part.role != "leader":
                remote = True
                continue
            waits.append(asyncio.ensure_future(part.wait_for_records(inst.positions[tp], timeout_s)))
        try:
            await asyncio.wait(waits, timeout=min(timeout_s, 0.1) if remote else timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    # -- offsets --------------------------------------------------------------------------------

    async def commit(self, inst: ConsumerInstance, offsets: dict[TopicPartition, tuple[int, str | None]] | None) -> None:
        """Commit offsets: the positions of the owned partitions when ``offsets`` is None, else the
        given ``{tp: (next offset, metadata)}``.

        Raises:
            IllegalGenerationError: the instance's generation is older than the group's (409 / 40904).
        """
        # the generation is read together with the positions, before any await (a rebalance meanwhile
        # must not stamp generation n's positions with n + 1)
        generation = inst.generation
        if offsets is None:
            offsets = {tp: (o, None) for tp, o in inst.consumed_positions().items()}
        await self._commit(inst.group, offsets, generation)

    async def _commit(self, group: str, offsets: dict[TopicPartition, tuple[int, str | None]],
                      generation: int | None) -> None:
        """Commit ``offsets`` read in ``generation`` (None: outside group membership), fenced by the group's."""
        if not offsets:
            return
        for t, p in sorted(offsets):
            meta = await self.broker.topic_fresh(t)
            self.broker.check_partition(meta, p)
        rows = [{"topic": t, "partition": p, "offset": o, "metadata": m} for (t, p), (o, m) in sorted(offsets.items())]
        current = await self.broker.group_generation(group) if generation is not None else None
        await asyncio.to_thread(self.broker.offset_store.commit, group, rows, generation=generation,
                                current_generation=current)

    async def _commit_quietly(self, inst: ConsumerInstance, positions: dict[TopicPartition, int],
                              generation: int | None) -> None:
        """Auto commit: a failure is logged and the caller goes on (as Kafka's auto commit)."""
        try:
            await self._commit(inst.group, {tp: (o, None) for tp, o in positions.items()}, generation)
        except IllegalGenerationError as e:
            log.info("auto commit of %s/%s refused: %s", inst.group, inst.name, e)
        except Exception as e:
            log.warning("auto commit of %s/%s failed: %s", inst.group, inst.name, e, exc_info=True)

    def committed(self, inst: ConsumerInstance, partitions: list[TopicPartition] | None) -> list[dict]:
        """The group's committed offsets of ``partitions`` (default: the owned ones); partitions without
        a commit are left out."""
        wanted = set(partitions) if partitions is not None else set(inst.owned)
        return [{"topic": c.topic, "partition": c.partition, "offset": c.offset, "metadata": c.metadata or ""}
                for c in self.broker.offset_store.committed(inst.group) if (c.topic, c.partition) in wanted]

    # -- description ----------------------------------------------------------------------------

    async def describe(self, group: str) -> dict:
        """Members of ``group`` cluster-wide (ZooKeeper) with their assignment in the current generation.

        Returns ``{"group", "generation", "assignor", "state", "members": [{"member_id", "broker_id",
        "base_uri", "subscription", "assignment": [{"topic", "partition"}]}]}``.
        """
        members = await asyncio.to_thread(self.membership.members, group)
        assignment = await asyncio.to_thread(self.membership.assignment, group)
        generation = await self.broker.group_generation(group)
        current = assignment is not None and assignment.generation == generation and \
            set(assignment.members) == set(members)
        state = "Empty" if not members else ("Stable" if current else "PreparingRebalance")
        return {
            "group": group, "generation": generation, "state": state,
            "assignor": assignment.assignor if assignment else None,
            "members": [{
                "member_id": m, "broker_id": info.broker_id, "base_uri": info.base_uri,
                "subscription": list(info.topics),
                "assignment": [{"topic": t, "partition": p} for t, p in
                               (assignment.partitions_of(m) if assignment else [])],
            } for m, info in sorted(members.items())],
        }


def _encode_all(tables: list[tuple[TopicPartition, pa.Table]], fmt: str) -> list[bytes]:
    """One records round as JSON arrays, one per partition."""
    return [codecs.encode_records(table, fmt, topic=tp[0], partition=tp[1]) for tp, table in tables]


def _record_bytes(table: pa.Table) -> int:
    """Bytes of keys and values of a record table (nulls count 0), computed by Arrow."""
    total = 0
    for name in ("key", "value"):
        lengths = pc.binary_length(table[name])
        total += int(pc.sum(lengths).as_py() or 0)
    return total
