"""Kafka's classic consumer group protocol on the coordinator: the state machine of one group, no I/O.

The groups whose members speak Kafka's wire protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
assign partitions themselves (the leader's client-side assignor). This module decides; the async shell
(:mod:`lakelog.consumer_groups.classic_coordinator`) holds the waiting requests, the timers and the
clock, and answers what :class:`ClassicGroup`'s methods return. Times are milliseconds on the shell's
clock (``now_ms``).

Copied from Apache Kafka's ``GroupCoordinator`` and ``GroupMetadata`` (core/src/main/scala/kafka/coordinator/
group/, 3.x) and ``ClassicGroup`` (group-coordinator/src/main/java/org/apache/kafka/coordinator/group/classic/):

- **States** (:data:`GroupState`): ``Empty`` (no member) -> ``PreparingRebalance`` (members join; the
  join phase ends when every known member has rejoined, or after the largest ``rebalance.timeout.ms`` of
  its members, or for an empty group after ``group.initial.rebalance.delay.ms``) -> ``CompletingRebalance``
  (the new generation is made: members that did not rejoin are removed, the protocol every member
  supports with the most first choices is selected, each member's JoinGroup is answered, the leader's
  with every member's metadata; the members now SyncGroup) -> ``Stable`` (the leader's SyncGroup carried
  the assignment; every member's SyncGroup is answered with its share). ``Dead``: the coordinator no
  longer holds the group (deleted, or its ``__consumer_offsets`` partition moved).
- **Join** (:meth:`ClassicGroup.join`): an unknown member (empty member id) gets an id
  ``{client.id}-{uuid}``; from JoinGroup v4 (KIP-394) it is only *pending* and answered
  MEMBER_ID_REQUIRED with that id, and joins with a second request. A known member's join in ``Stable``
  or ``CompletingRebalance`` with unchanged protocols (and not the leader, in ``Stable``) is answered at
  once with the current generation; otherwise the group (re)balances.
- **Fencing**: SyncGroup, Heartbeat and OffsetCommit name the member and its generation:
  UNKNOWN_MEMBER_ID for a member not in the group, ILLEGAL_GENERATION for another generation,
  REBALANCE_IN_PROGRESS while the group is ``PreparingRebalance`` (the member must rejoin),
  INCONSISTENT_GROUP_PROTOCOL for a protocol type or name other than the group's.
- **Liveness** (:meth:`ClassicGroup.expired_members`): a member whose last heartbeat (or join, sync) is
  older than its ``session.timeout.ms`` is removed and the group rebalances; a member waiting in a join
  or sync phase is kept alive; a pending member (v4+) that does not rejoin within its session timeout is
  forgotten.
- **Static members** (``group.instance.id``, KIP-345): a member with an instance id joins without the
  two-step join; when it restarts (a join with an empty member id and a known instance id) it takes its
  predecessor's place under a new member id, keeps its assignment and, in ``Stable`` with unchanged
  protocols, causes no rebalance; the predecessor's id is fenced (FENCED_INSTANCE_ID). A static member
  that stops leaves by its session timeout or a LeaveGroup naming its instance id.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from lakelog.consumer_groups.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

__all__ = ["ClassicGroup", "ClassicMember", "GroupState", "JoinResult", "SyncWaiter"]

#: Kafka's classic group states (``GroupState`` in GroupMetadata.scala)
GroupState = Literal["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


@dataclass
class ClassicMember:
    """A member of a classic group (Kafka's ``MemberMetadata``).

    Attributes:
        member_id: given by the coordinator. group_instance_id: the static member's ``group.instance.id``.
        client_id, client_host: the client's ``client.id`` and address, as DescribeGroups shows them.
        session_timeout_ms, rebalance_timeout_ms: the member's ``session.timeout.ms`` and
            ``max.poll.interval.ms`` (how long a rebalance waits for it to rejoin).
        protocol_type: ``consumer`` for Kafka consumers. protocols: ``(name, metadata)`` by preference.
        assignment: its share of the current generation's assignment (SyncGroup), opaque bytes.
        awaiting_join, awaiting_sync: a JoinGroup / SyncGroup of the member waits for the phase's end.
        last_heartbeat_ms: when it last showed it is alive (a heartbeat, join or sync).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    last_heartbeat_ms: int = 0

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol`` (b"" when it does not support it)."""
        return next((m for name, m in self.protocols if name == protocol), b"")

    def vote(self, candidates: set[str]) -> str:
        """The member's first choice among ``candidates`` (Kafka's ``MemberMetadata.vote``)."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(frozen=True)
class JoinResult:
    """A JoinGroup's answer (Kafka's ``JoinGroupResult``).

    Attributes:
        member_id: the member's id. generation_id: the new generation. protocol_type, protocol_name: the
        group's. leader_id: the member that assigns. members: ``(member id, group instance id, metadata)``
        of every member for the leader, empty for the others. skip_assignment: always False (KIP-814's
        static leader, not served).
    """

    member_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str
    members: list[tuple[str, str | None, bytes]]
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncWaiter:
    """A SyncGroup to answer: the member and the assignment it gets, or the error it gets."""

    member_id: str
    assignment: bytes = b""
    error: Exception | None = None


@dataclass
class ClassicGroup:
    """One classic group on its coordinator (see the module docstring).

    Attributes:
        group_id: the group. generation_id: the current generation (0 before the first; a group made on a
            coordinator starts from the generation its committed offsets carry, so generations never go
            back when the coordinator moves). state: see :data:`GroupState`.
        protocol_type, protocol_name: the members' protocol type (``consumer``) and the selected assignment
            protocol (``range``, ``cooperative-sticky``, ...), None while the group is empty.
        leader_id: the member that assigns the current generation.
        members: by member id. pending: ids given by MEMBER_ID_REQUIRED, with when they expire.
        static_members: ``group.instance.id`` -> the member id that holds it now.
        rebalance_started_ms: when the current join phase began (None outside ``PreparingRebalance``).
        initial_delay_until_ms: the end of an empty group's initial rebalance delay (each new member
            extends it by ``group.initial.rebalance.delay.ms``, up to the rebalance timeout).
        initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms``.
        failed_syncs: SyncGroups left waiting when a new join phase began, to answer REBALANCE_IN_PROGRESS
            (the shell takes them after each call).
    """

    group_id: str
    generation_id: int = 0
    state: GroupState = "Empty"
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    rebalance_started_ms: int | None = None
    initial_delay_until_ms: int | None = None
    initial_rebalance_delay_ms: int = 3000
    failed_syncs: list[SyncWaiter] = field(default_factory=list)

    # -- views ----------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """No member (pending ones do not count)."""
        return not self.members

    def subscription(self, member: ClassicMember) -> bytes:
        """The member's metadata for the group's protocol (for its first choice before one is selected)."""
        if self.protocol_name:
            return member.metadata(self.protocol_name)
        return member.protocols[0][1] if member.protocols else b""

    def candidate_protocols(self) -> set[str]:
        """The assignment protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member of ``protocol_type`` with ``protocols`` may join (Kafka's ``supportsProtocols``):
        any non-empty one in an empty group, else the group's type and one protocol every member has."""
        names = {name for name, _ in protocols}
        if self.is_empty():
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def rebalance_deadline_ms(self) -> int | None:
        """When the current join phase ends at the latest (None outside ``PreparingRebalance``): an empty
        group's initial delay, else the start plus the largest member rebalance timeout."""
        if self.state != "PreparingRebalance" or self.rebalance_started_ms is None:
            return None
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        if self.initial_delay_until_ms is not None:
            return min(self.initial_delay_until_ms, self.rebalance_started_ms + timeout)
        return self.rebalance_started_ms + timeout

    def all_joined(self) -> bool:
        """Every known member rejoined and no pending member is left (Kafka's ``hasAllMembersJoined``)."""
        return all(m.awaiting_join for m in self.members.values()) and not self.pending

    def join_can_complete(self, now_ms: int) -> bool:
        """The join phase may end now: everyone rejoined (after an empty group's initial delay), or its
        deadline passed."""
        if self.state != "PreparingRebalance":
            return False
        deadline = self.rebalance_deadline_ms()
        if deadline is not None and now_ms >= deadline:
            return True
        return self.all_joined() and self.initial_delay_until_ms is None

    # -- join -----------------------------------------------------------------------------------

    def _check_protocol(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> None:
        if not self.supports(protocol_type, protocols):
            raise InconsistentGroupProtocolError(
                f"Group '{self.group_id}' uses protocol type {self.protocol_type!r} with assignors "
                f"{sorted(self.candidate_protocols())}; the member offers type {protocol_type!r} with "
                f"{sorted(name for name, _ in protocols)}: use a common assignor (partition.assignment.strategy).")

    def join(self, *, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool,
             now_ms: int) -> tuple[str, JoinResult | None]:
        """A JoinGroup. Returns the member's id and the answer when it is given at once, or None when the
        request waits for the join phase's end (:meth:`complete_join` answers it).

        Raises:
            MemberIdRequiredError: a new member's first join from v4 (carries the member id given).
            UnknownMemberIdError: a member id the group does not hold.
            InconsistentGroupProtocolError: a protocol type or assignors the group cannot use.
        """
        if self.state == "Dead":
            raise UnknownMemberIdError(f"Group '{self.group_id}' is being removed; rejoin.")
        self._check_protocol(protocol_type, protocols)
        if not member_id and group_instance_id is not None:
            return self._join_static(group_instance_id, client_id, client_host, session_timeout_ms,
                                     rebalance_timeout_ms, protocol_type, protocols, now_ms)
        self._check_instance(member_id, group_instance_id)
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:
                self.pending[new_id] = now_ms + session_timeout_ms
                raise MemberIdRequiredError(
                    f"Member of group '{self.group_id}' must rejoin with its member id {new_id}.", member_id=new_id)
            self._add_member(new_id, group_instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, now_ms)
            return new_id, None
        if member_id in self.pending:
            del self.pending[member_id]
            self._add_member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, now_ms)
            return member_id, None
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group '{self.group_id}'; "
                                       "rejoin with an empty member id.")
        member.last_heartbeat_ms = now_ms
        unchanged = member.protocols == protocols
        if self.state == "CompletingRebalance" and unchanged:
            return member_id, self.join_result(member_id)
        if self.state == "Stable" and unchanged and member_id != self.leader_id:
            return member_id, self.join_result(member_id)
        member.protocols, member.protocol_type = list(protocols), protocol_type
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        member.awaiting_join = True
        self.prepare_rebalance(now_ms)
        return member_id, None

    def _check_instance(self, member_id: str, group_instance_id: str | None) -> None:
        """Raises FencedInstanceIdError when ``group_instance_id`` is held by another member id."""
        holder = self.static_members.get(group_instance_id) if group_instance_id is not None else None
        if holder is not None and holder != member_id:
            raise FencedInstanceIdError(f"group.instance.id {group_instance_id!r} of group '{self.group_id}' is held "
                                        f"by member {holder}, not {member_id or '(none)'}: give each consumer its own.")

    def _join_static(self, group_instance_id: str, client_id: str, client_host: str, session_timeout_ms: int,
                     rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                     now_ms: int) -> tuple[str, JoinResult | None]:
        """A static member's join with an empty member id: a new member, or a restarted one that takes its
        predecessor's place (Kafka's ``updateStaticMemberAndRebalance``)."""
        new_id = f"{group_instance_id}-{uuid.uuid4()}"
        old_id = self.static_members.get(group_instance_id)
        member = self.members.pop(old_id, None) if old_id is not None else None
        if member is None:
            self._add_member(new_id, group_instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, now_ms)
            return new_id, None
        member.member_id, member.client_id, member.client_host = new_id, client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        member.last_heartbeat_ms, member.awaiting_sync = now_ms, False
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if self.state == "Stable" and member.protocols == list(protocols):
            return new_id, self.join_result(new_id)  # it keeps its assignment: no rebalance
        member.protocols, member.protocol_type, member.awaiting_join = list(protocols), protocol_type, True
        self.prepare_rebalance(now_ms)
        return new_id, None

    def _add_member(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                    session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                    protocols: list[tuple[str, bytes]], now_ms: int) -> None:
        if self.is_empty():
            self.protocol_type = protocol_type
        self.members[member_id] = ClassicMember(
            member_id, group_instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
            protocol_type, list(protocols), awaiting_join=True, last_heartbeat_ms=now_ms)
        if group_instance_id is not None:
            self.static_members[group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        if self.state == "PreparingRebalance" and self.initial_delay_until_ms is not None:
            # an empty group's first rebalance waits a little more for each new member (Kafka's InitialDelayedJoin)
            self.initial_delay_until_ms = now_ms + self.initial_rebalance_delay_ms
        self.prepare_rebalance(now_ms)

    def prepare_rebalance(self, now_ms: int) -> None:
        """Start a join phase (a no-op in ``PreparingRebalance``); the SyncGroups left waiting go to
        :attr:`failed_syncs` (Kafka's ``prepareRebalance``)."""
        if self.state == "PreparingRebalance":
            return
        if self.state == "CompletingRebalance":
            for m in self.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    self.failed_syncs.append(SyncWaiter(m.member_id, error=RebalanceInProgressError(
                        f"Group '{self.group_id}' started another rebalance; rejoin.")))
        was_empty = self.state == "Empty"
        self.state = "PreparingRebalance"
        self.rebalance_started_ms = now_ms
        self.initial_delay_until_ms = now_ms + self.initial_rebalance_delay_ms \
            if was_empty and self.initial_rebalance_delay_ms > 0 else None

    def complete_join(self, now_ms: int) -> list[JoinResult]:
        """End the join phase (Kafka's ``onCompleteJoin``): members that did not rejoin are removed, the next
        generation is made, and every waiting JoinGroup is answered (returned). An empty group goes to
        ``Empty`` with a new generation and answers nothing."""
        for member_id in [m for m, member in self.members.items() if not member.awaiting_join]:
            self._remove(member_id)
        self.pending.clear()
        self.rebalance_started_ms = None
        self.initial_delay_until_ms = None
        self.generation_id += 1
        if self.is_empty():
            self.state, self.protocol_name, self.protocol_type, self.leader_id = "Empty", None, None, None
            return []
        self.state = "CompletingRebalance"
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        self.protocol_name = max(votes.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        results = []
        for member in self.members.values():
            member.awaiting_join = False
            member.last_heartbeat_ms = now_ms
            results.append(self.join_result(member.member_id))
        return results

    def join_result(self, member_id: str) -> JoinResult:
        """The current generation's JoinGroup answer for ``member_id`` (every member's metadata for the leader)."""
        members = [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name or ""))
                   for m in self.members.values()] if member_id == self.leader_id else []
        return JoinResult(member_id, self.generation_id, self.protocol_type, self.protocol_name,
                          self.leader_id or "", members)

    # -- sync, heartbeat, commit fencing --------------------------------------------------------

    def _member(self, member_id: str, generation_id: int, group_instance_id: str | None = None) -> ClassicMember:
        self._check_instance(member_id, group_instance_id)
        member = self.members.get(member_id)
        if member is None or self.state in ("Empty", "Dead"):
            raise UnknownMemberIdError(f"Member {member_id or '(none)'} is not a member of group "
                                       f"'{self.group_id}'; rejoin with an empty member id.")
        if generation_id != self.generation_id:
            raise IllegalGenerationError(f"Member {member_id} of group '{self.group_id}' is at generation "
                                         f"{generation_id}, the group at {self.generation_id}: rejoin.")
        return member

    def sync(self, *, member_id: str, generation_id: int, protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], now_ms: int,
             group_instance_id: str | None = None) -> list[SyncWaiter] | None:
        """A SyncGroup. Returns the SyncGroups answered now (this one's included; the leader's answers every
        waiting member), or None when this one waits for the leader's.

        Raises:
            UnknownMemberIdError, IllegalGenerationError, InconsistentGroupProtocolError (v5+ names the
            protocol), RebalanceInProgressError (the group is in a join phase).
        """
        member = self._member(member_id, generation_id, group_instance_id)
        if (protocol_type is not None and protocol_type != self.protocol_type) or \
                (protocol_name is not None and protocol_name != self.protocol_name):
            raise InconsistentGroupProtocolError(
                f"Group '{self.group_id}' uses {self.protocol_type}/{self.protocol_name}, the SyncGroup names "
                f"{protocol_type}/{protocol_name}.")
        if self.state == "PreparingRebalance":
            raise RebalanceInProgressError(f"Group '{self.group_id}' is rebalancing; rejoin.")
        member.last_heartbeat_ms = now_ms
        if self.state == "Stable":
            return [SyncWaiter(member_id, member.assignment)]
        member.awaiting_sync = True
        if member_id != self.leader_id:
            return None
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self.state = "Stable"
        answered = []
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                answered.append(SyncWaiter(m.member_id, m.assignment))
        return answered

    def heartbeat(self, *, member_id: str, generation_id: int, now_ms: int,
                  group_instance_id: str | None = None) -> None:
        """A Heartbeat: the member is alive.

        Raises:
            UnknownMemberIdError, IllegalGenerationError; RebalanceInProgressError in a join phase (the
            member must rejoin; its heartbeat still counts).
        """
        member = self._member(member_id, generation_id, group_instance_id)
        member.last_heartbeat_ms = now_ms
        if self.state == "PreparingRebalance":
            raise RebalanceInProgressError(f"Group '{self.group_id}' is rebalancing; rejoin.")

    def check_commit(self, *, member_id: str, generation_id: int, now_ms: int,
                     group_instance_id: str | None = None) -> None:
        """An OffsetCommit of a member (Kafka's ``handleCommitOffsets`` checks): a commit without a member
        and generation is only taken while the group is empty.

        Raises:
            UnknownMemberIdError, IllegalGenerationError; RebalanceInProgressError while the group
            completes a rebalance (the member's assignment is not decided yet).
        """
        if generation_id < 0 and not member_id and self.is_empty():
            return
        member = self._member(member_id, generation_id, group_instance_id)
        if self.state == "CompletingRebalance":
            raise RebalanceInProgressError(f"Group '{self.group_id}' is completing a rebalance; commit after it.")
        member.last_heartbeat_ms = now_ms

    # -- leave, expiry --------------------------------------------------------------------------

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def leave(self, member_id: str, now_ms: int, group_instance_id: str | None = None) -> str:
        """A member leaves (LeaveGroup, or its session expired): the group rebalances (Kafka's
        ``removeMemberAndUpdateGroup``). A static member may be named by its instance id alone. Returns the
        member id that left.

        Raises:
            UnknownMemberIdError: neither a member nor a pending member. FencedInstanceIdError: the
            instance id is held by another member id.
        """
        if group_instance_id is not None:
            holder = self.static_members.get(group_instance_id)
            if holder is None:
                raise UnknownMemberIdError(f"group.instance.id {group_instance_id!r} is not a member of group "
                                           f"'{self.group_id}'.")
            self._check_instance(member_id or holder, group_instance_id)
            member_id = holder
        if member_id in self.pending:
            del self.pending[member_id]
            return member_id
        if member_id not in self.members:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group '{self.group_id}'.")
        self._remove(member_id)
        if self.state in ("Stable", "CompletingRebalance"):
            self.prepare_rebalance(now_ms)
        return member_id

    def expired_members(self, now_ms: int) -> list[str]:
        """Members whose session timed out (Kafka's ``shouldKeepAlive`` false): no heartbeat for their
        ``session.timeout.ms``, unless they wait in a join or sync phase."""
        return [m.member_id for m in self.members.values()
                if not m.awaiting_join and not m.awaiting_sync and now_ms - m.last_heartbeat_ms >= m.session_timeout_ms]

    def expire_pending(self, now_ms: int) -> None:
        """Forget pending member ids not used within their session timeout."""
        for member_id in [m for m, deadline in self.pending.items() if deadline <= now_ms]:
            del self.pending[member_id]

    def next_deadline_ms(self) -> int | None:
        """The earliest time something may change by itself (a session, a pending id, the join phase's end)."""
        times = [m.last_heartbeat_ms + m.session_timeout_ms for m in self.members.values()
                 if not m.awaiting_join and not m.awaiting_sync]
        times.extend(self.pending.values())
        deadline = self.rebalance_deadline_ms()
        if deadline is not None:
            times.append(deadline)
        return min(times, default=None)
