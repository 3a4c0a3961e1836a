"""ISR maintenance on the leader: shrink and expand the in-sync replicas, written to ZooKeeper.

Kafka's ``Partition.maybeShrinkIsr`` / ``maybeExpandIsr``: the decisions are the partition's own
(:meth:`~lakelog.replication.partition.Partition.lagging_followers`,
:meth:`~lakelog.replication.partition.Partition.record_follower_fetch`,
:meth:`~lakelog.replication.partition.Partition.proposed_isr`); this module writes them.

Steps of an ISR write (:meth:`IsrManager._update_isr`, mirrored in the code):

1. under the partition's lock, the partition proposes the new ISR (None: nothing to do, or not leader);
2. the state znode is written with its version (compare-and-set);
3. on a version conflict the state is re-read: a new leader or epoch ends the attempt (the watch makes
   this broker a follower), else the proposal is made again on the fresh state (at most 10 times);
4. the written state is applied to the partition (HW may move, waiters wake).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace

from kazoo.exceptions import BadVersionError

from lakelog.config import BrokerSettings
from lakelog.replication.metadata import ClusterMetadata
from lakelog.replication.metadata_cache import MetadataCache
from lakelog.replication.partition import Partition, now_ms

log = logging.getLogger(__name__)


class IsrManager:
    """Writes the ISR changes of the partitions this broker leads.

    Args:
        settings: ``broker.id``, ``replica.lag.time.max.ms``.
        metadata: ZooKeeper writes; cache: ZooKeeper reads of the partition state.
    """

    def __init__(self, settings: BrokerSettings, *, metadata: ClusterMetadata, cache: MetadataCache) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.metadata = metadata
        self.cache = cache
        self._partitions: Callable[[], list[Partition]] = list
        self._running = False
        self._task: asyncio.Task | None = None
        #: ISR changes written since the broker started (Kafka's ``IsrShrinksPerSec``, ``IsrExpandsPerSec``)
        self.shrinks = 0
        self.expands = 0

    def start(self, partitions: Callable[[], list[Partition]]) -> None:
        """Start the expiry loop over ``partitions()`` (inside the serving event loop)."""
        self._partitions = partitions
        self._running = True
        self._task = asyncio.get_running_loop().create_task(self._isr_expiration_loop(), name="isr-expiration")

    def stop(self) -> None:
        """Stop the expiry loop and ignore further follower fetches."""
        self._running = False
        if self._task is not None:
            self._task.cancel()

    def record_follower_fetch(self, part: Partition, replica_id: int, offset: int, *, log_start_offset: int = -1) -> None:
        """A follower fetched at ``offset`` (its log starting at ``log_start_offset``, -1: not said): update
        its progress, the HW, maybe re-admit it to the ISR."""
        if part.record_follower_fetch(replica_id, offset, at_ms=now_ms(), log_start_offset=log_start_offset) \
                and self._running:
            self._schedule_isr_update(part, add={replica_id})

    def _schedule_isr_update(self, part: Partition, *, add: set[int] = frozenset(),
                             remove: set[int] = frozenset()) -> None:
        if part.isr_update_running:
            return
        part.isr_update_running = True
        asyncio.get_running_loop().create_task(self._update_isr(part, add=set(add), remove=set(remove)))

    async def _update_isr(self, part: Partition, *, add: set[int], remove: set[int]) -> None:
        """Write the leader's new ISR to ZooKeeper (compare-and-set; re-read and retry on a race)."""
        try:
            for _ in range(10):
                async with part.lock:
                    # 1. the partition proposes the new ISR
                    isr = part.proposed_isr(add=add, remove=remove)
                    state = part.state
                    if isr is None or state is None:
                        return
                    # 2. compare-and-set on the state znode
                    try:
                        written = await asyncio.to_thread(self.metadata.set_partition_state, part.topic,
                                                          part.partition, replace(state, isr=isr))
                    except BadVersionError:
                        # 3. a race: re-read; deposed ends it, else propose again on the fresh state
                        fresh = await self.cache.partition_state(part.topic, part.partition)
                        if fresh.leader != self.broker_id or fresh.leader_epoch != part.leader_epoch:
                            return  # deposed: the watch makes us a follower
                        part.state = fresh
                        continue
                    # 4. apply what was written
                    log.info("%s: ISR %s -> %s", part.name, state.isr, isr,
                             extra={"topic": part.topic, "partition": part.partition})
                    if len(isr) < len(state.isr):
                        self.shrinks += 1
                    elif len(isr) > len(state.isr):
                        self.expands += 1
                    part.isr_written(written, added=add, at_ms=now_ms())
                    return
        except Exception:
            log.exception("ISR update of %s failed", part.name,
                          extra={"topic": part.topic, "partition": part.partition})
        finally:
            part.isr_update_running = False

    async def _isr_expiration_loop(self) -> None:
        """Every ``replica.lag.time.max.ms / 2``: followers that have not caught up for that long leave the ISR."""
        lag_ms = self.settings.replica_lag_time_max_ms
        interval_s = min(max(lag_ms / 2000.0, 0.05), 5.0)
        while self._running:
            await asyncio.sleep(interval_s)
            at = now_ms()
            for part in self._partitions():
                out = part.lagging_followers(at_ms=at, replica_lag_time_max_ms=lag_ms)
                if out:
                    log.info("%s: followers %s have not caught up for %d ms", part.name, sorted(out), lag_ms,
                             extra={"topic": part.topic, "partition": part.partition})
                    self._schedule_isr_update(part, remove=out)
