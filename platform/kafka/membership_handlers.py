"""The Kafka listener's group membership and group admin APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups and OffsetDelete, translated onto the request layer
(:class:`~lakelog.requests.group_membership.GroupMembershipOperations`,
:class:`~lakelog.requests.groups.GroupOffsets`).

Versions (:mod:`lakelog.kafka.versions`): JoinGroup v4+ asks a new member to rejoin with the id it is
given (MEMBER_ID_REQUIRED, KIP-394); LeaveGroup v3+ names several members (KIP-345), earlier versions
one, whose error is the response's; SyncGroup v5+ and JoinGroup v7+ carry the protocol type and name;
ListGroups v4+ filters by state (KIP-518).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lakelog.consumer_groups.errors import MemberIdRequiredError
from lakelog.kafka import errors as codes
from lakelog.kafka.codec import response_class
from lakelog.kafka.errors import kafka_error_code
from lakelog.requests import RequestContext, RequestHandler
from lakelog.requests.group_membership import JoinGroupRequest, SyncGroupRequest

__all__ = ["MembershipApis"]

log = logging.getLogger(__name__)


_LEADER_NOT_AVAILABLE = 5
_COORDINATOR_NOT_AVAILABLE = 15


def _code(error: BaseException, what: str) -> int:
    """The Kafka error code of a group request's ``error``; a coordinator partition without a leader is
    COORDINATOR_NOT_AVAILABLE (clients find the coordinator again and retry)."""
    code = kafka_error_code(error, authorization=codes.GROUP_AUTHORIZATION_FAILED)
    if code == codes.UNKNOWN_SERVER_ERROR:
        log.error("%s failed", what, exc_info=error)
    return _COORDINATOR_NOT_AVAILABLE if code == _LEADER_NOT_AVAILABLE else code


class MembershipApis:
    """The group membership and group admin APIs of one listener.

    Args:
        requests: the broker's request layer.
    """

    def __init__(self, *, requests: RequestHandler) -> None:
        self.requests = requests
        self.membership = requests.group_membership

    def handlers(self) -> dict[int, Any]:
        """API key -> handler, for :class:`~lakelog.kafka.handlers.KafkaApis`."""
        return {11: self.join_group, 12: self.heartbeat, 13: self.leave_group, 14: self.sync_group,
                15: self.describe_groups, 16: self.list_groups, 42: self.delete_groups, 47: self.offset_delete}

    async def join_group(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's JoinGroup: answered once the group's join phase ends."""
        cls = response_class(11)
        member_cls = cls.JoinGroupResponseMember
        no_protocol = None if version >= 7 else ""  # ProtocolName is nullable from v7
        request = JoinGroupRequest(
            group=body.group_id, member_id=body.member_id or "",
            group_instance_id=getattr(body, "group_instance_id", None), session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=getattr(body, "rebalance_timeout_ms", -1) if version >= 1 else -1,
            protocol_type=body.protocol_type, protocols=[(p.name, bytes(p.metadata or b"")) for p in body.protocols],
            require_known_member_id=version >= 4)
        try:
            result = await self.membership.join_group(request, context=context)
        except MemberIdRequiredError as e:
            return cls(version=version, throttle_time_ms=0, error_code=79, generation_id=-1, protocol_type=None,
                       protocol_name=no_protocol, leader="", skip_assignment=False, member_id=e.member_id, members=[])
        except Exception as e:
            return cls(version=version, throttle_time_ms=0, error_code=_code(e, f"JoinGroup of {body.group_id!r}"),
                       generation_id=-1, protocol_type=None, protocol_name=no_protocol, leader="", skip_assignment=False,
                       member_id=body.member_id or "", members=[])
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, generation_id=result.generation_id,
                   protocol_type=result.protocol_type, protocol_name=result.protocol_name or "", leader=result.leader_id,
                   skip_assignment=result.skip_assignment, member_id=result.member_id,
                   members=[member_cls(version=version, member_id=m, group_instance_id=i, metadata=meta)
                            for m, i, meta in result.members])

    async def sync_group(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's SyncGroup: the member's assignment once the leader sent the generation's."""
        cls = response_class(14)
        request = SyncGroupRequest(
            group=body.group_id, member_id=body.member_id, generation_id=body.generation_id,
            protocol_type=getattr(body, "protocol_type", None) if version >= 5 else None,
            protocol_name=getattr(body, "protocol_name", None) if version >= 5 else None,
            assignments={a.member_id: bytes(a.assignment or b"") for a in body.assignments or []},
            group_instance_id=getattr(body, "group_instance_id", None) if version >= 3 else None)
        try:
            assignment = await self.membership.sync_group(request, context=context)
            code = codes.NONE
        except Exception as e:
            assignment, code = b"", _code(e, f"SyncGroup of {body.group_id!r}")
        return cls(version=version, throttle_time_ms=0, error_code=code, protocol_type=request.protocol_type,
                   protocol_name=request.protocol_name, assignment=assignment)

    async def heartbeat(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's Heartbeat."""
        cls = response_class(12)
        try:
            await self.membership.heartbeat(body.group_id, member_id=body.member_id, generation_id=body.generation_id,
                                            group_instance_id=getattr(body, "group_instance_id", None)
                                            if version >= 3 else None, context=context)
            code = codes.NONE
        except Exception as e:
            code = _code(e, f"Heartbeat of {body.group_id!r}")
        return cls(version=version, throttle_time_ms=0, error_code=code)

    async def leave_group(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's LeaveGroup (v3+: a batch of members, each with its error)."""
        cls = response_class(13)
        if version >= 3:
            identities = [(m.member_id, m.group_instance_id) for m in body.members]
        else:
            identities = [(body.member_id, None)]
        try:
            errors = await self.membership.leave_group(body.group_id, identities, context=context)
        except Exception as e:
            return cls(version=version, throttle_time_ms=0, error_code=_code(e, f"LeaveGroup of {body.group_id!r}"),
                       members=[])
        member_codes = [codes.NONE if e is None else _code(e, "LeaveGroup") for e in errors]
        if version < 3:
            return cls(version=version, throttle_time_ms=0, error_code=member_codes[0], members=[])
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, members=[
            cls.MemberResponse(version=version, member_id=m, group_instance_id=i, error_code=c)
            for (m, i), c in zip(identities, member_codes)])

    async def describe_groups(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DescribeGroups: each group as its coordinator holds it (another broker answers
        NOT_COORDINATOR for it)."""
        cls = response_class(15)
        group_cls = cls.DescribedGroup
        member_cls = group_cls.DescribedGroupMember

        async def one(group: str) -> Any:
            try:
                s = await self.membership.describe_group(group, context=context)
            except Exception as e:
                return group_cls(version=version, error_code=_code(e, f"DescribeGroups of {group!r}"),
                                 error_message=str(e), group_id=group, group_state="", protocol_type="",
                                 protocol_data="", members=[])
            return group_cls(version=version, error_code=codes.NONE, error_message=None, group_id=group,
                             group_state=s.state, protocol_type=s.protocol_type, protocol_data=s.protocol_name,
                             members=[member_cls(
                                 version=version, member_id=m.member_id, group_instance_id=m.group_instance_id,
                                 client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                                 member_assignment=m.assignment) for m in s.members])

        groups = await asyncio.gather(*(one(g) for g in body.groups))
        return cls(version=version, throttle_time_ms=0, groups=list(groups))

    async def list_groups(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's ListGroups: the groups this broker coordinates (v4+: only those in ``states_filter``)."""
        cls = response_class(16)
        states = list(getattr(body, "states_filter", None) or []) if version >= 4 else []
        try:
            listed = await self.membership.list_groups(states=states or None, context=context)
        except Exception as e:
            return cls(version=version, throttle_time_ms=0, error_code=_code(e, "ListGroups"), groups=[])
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, groups=[
            cls.ListedGroup(version=version, group_id=g.group, protocol_type=g.protocol_type, group_state=g.state,
                            group_type="classic") for g in listed])

    async def delete_groups(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DeleteGroups: each empty group's committed offsets and state go."""
        cls = response_class(42)

        async def one(group: str) -> Any:
            try:
                await self.membership.delete_group(group, context=context)
                code = codes.NONE
            except Exception as e:
                code = _code(e, f"DeleteGroups of {group!r}")
            return cls.DeletableGroupResult(version=version, group_id=group, error_code=code)

        results = [await one(g) for g in body.groups_names]
        return cls(version=version, throttle_time_ms=0, results=results)

    async def offset_delete(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's OffsetDelete: the group's committed offsets of the named partitions (Delete on the group,
        Read on each topic)."""
        cls = response_class(47)
        topic_cls = cls.OffsetDeleteResponseTopic
        part_cls = topic_cls.OffsetDeleteResponsePartition
        topics = []
        for t in body.topics:
            partitions = [p.partition_index for p in t.partitions]
            try:
                await self.membership.delete_offsets(body.group_id, topic=t.name, partitions=partitions,
                                                     context=context)
                code = codes.NONE
            except Exception as e:
                code = _code(e, f"OffsetDelete of {body.group_id!r}")
            topics.append(topic_cls(version=version, name=t.name, partitions=[
                part_cls(version=version, partition_index=p, error_code=code) for p in partitions]))
        return cls(version=version, error_code=codes.NONE, throttle_time_ms=0, topics=topics)
