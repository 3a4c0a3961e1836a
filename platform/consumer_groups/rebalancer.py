"""Rebalancing of the groups that have subscribed consumer instances on this broker.

:class:`GroupRebalancer` runs steps 1-3 of the revoke-before-assign protocol described in
:mod:`lakelog.consumer_groups.membership` for the local members of a group, whenever a ZooKeeper watch
on the group or a local change (join, leave, new topics) asks for it:

1. compute: make the stored assignment describe the live members (else generation n + 1 is written);
2. revoke what each local member loses (auto committing its positions), then acknowledge the generation;
3. assign: once every member of the generation acknowledged, gained partitions become readable at the
   group's committed offsets (else ``auto.offset.reset``).

A pass that fails is retried after 0.5 s; kicks that arrive during a pass cause one more pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from lakelog.consumer_groups.instances import ConsumerInstance
from lakelog.consumer_groups.membership import GroupMembership, GroupWatch
from lakelog.consumer_groups.positions import InstanceOffsets

log = logging.getLogger(__name__)

#: Pause before a failed rebalance pass is retried (seconds).
RETRY_BACKOFF_S = 0.5


class _LocalGroup:
    """Bookkeeping of a group with subscribed members on this broker."""

    def __init__(self, watch: GroupWatch) -> None:
        self.watch = watch
        self.dirty = False
        self.running = False


class GroupRebalancer:
    """Reconciles the local members of groups with their ZooKeeper assignment.

    Args:
        membership: the ZooKeeper side of groups (members, assignments, acknowledgements, watches).
        offsets: auto commits on revocation, initial positions of gained partitions.
        local_members: the live consumer instances of a group on this broker.

    Use from the broker's event loop: :meth:`start` there, then :meth:`track` a group when a local
    instance joins it and :meth:`untrack` it when the last one leaves.
    """

    def __init__(self, membership: GroupMembership, offsets: InstanceOffsets,
                 local_members: Callable[[str], list[ConsumerInstance]]) -> None:
        self.membership = membership
        self.offsets = offsets
        self._local_members = local_members
        self._groups: dict[str, _LocalGroup] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    def start(self) -> None:
        """Bind to the running event loop (ZooKeeper watches schedule their passes there)."""
        self._loop = asyncio.get_running_loop()

    def stop(self) -> None:
        """Ignore watches from now on (instances are being closed)."""
        self._stopping = True

    async def track(self, group: str) -> None:
        """Watch ``group`` in ZooKeeper (once) and run a rebalance pass."""
        if group not in self._groups:
            watch = await asyncio.to_thread(self.membership.watch, group, lambda g=group: self._schedule(g))
            if group in self._groups:  # tracked meanwhile by a concurrent join
                watch.stop()
            else:
                self._groups[group] = _LocalGroup(watch)
        self.kick(group)

    def untrack(self, group: str) -> None:
        """Stop watching ``group`` (no local member is subscribed any more)."""
        local = self._groups.pop(group, None)
        if local is not None:
            local.watch.stop()

    def kick(self, group: str) -> None:
        """Ask for a rebalance pass of a tracked group (runs now, or once more after the current one)."""
        local = self._groups.get(group)
        if local is None:
            return
        local.dirty = True
        if not local.running:
            local.running = True
            asyncio.ensure_future(self._reconcile_loop(group, local))

    def kick_all(self) -> None:
        """A pass for every tracked group (topics or partition counts changed)."""
        for group in list(self._groups):
            self.kick(group)

    def kick_waiting(self) -> None:
        """A pass for every group whose local members wait for acknowledgements (a safety net in case a
        watch was missed)."""
        for group in list(self._groups):
            if any(i.pending for i in self._local_members(group)):
                self.kick(group)

    def _schedule(self, group: str) -> None:
        """From kazoo's thread: run the group's reconciliation in the event loop."""
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(self.kick, group)

    async def _reconcile_loop(self, group: str, local: _LocalGroup) -> None:
        try:
            while local.dirty and self._groups.get(group) is local:
                local.dirty = False
                try:
                    await self.reconcile(group)
                except Exception:
                    log.exception("rebalance of group %s failed; retrying", group)
                    local.dirty = True
                    await asyncio.sleep(RETRY_BACKOFF_S)
        finally:
            local.running = False

    async def reconcile(self, group: str) -> None:
        """One rebalance pass of ``group`` for its local subscribed members (steps 1-3 above)."""
        members = [i for i in self._local_members(group) if i.subscribed]
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
                    await self.offsets.commit_quietly(inst, positions, assignment.generation)
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
                positions = await self.offsets.initial_positions(inst, gained)
                if not inst.closed and inst.generation == assignment.generation and inst.pending >= gained:
                    inst.activate(positions)
