"""Authorization of requests: what each request kind needs, checked by the broker's one
:class:`~lakelog.security.authorizer.Authorizer` (``authorizer.enabled``; disabled, everything is allowed)
for a principal and the client's address, whatever front door the request came by.

What each API needs, as Kafka's ``KafkaApis`` checks it:

======================================  =====================================================================
produce (v2, v3, Arrow)                 Write on the topic; with ``X-Lakelog-Transactional-Id`` also Write
                                        on the transactional id
fetch                                   Read on the topic
metadata, offsets, partitions, logs     Describe on the topic; topic lists show only describable topics
create topic                            Create on the cluster, else Create on the topic
delete topic                            Delete on the topic
add partitions                          Alter on the topic
describe / alter topic configs          DescribeConfigs / AlterConfigs on the topic
consumer instances                      Read on the group (JoinGroup), Read on each topic read; an instance
                                        answers only the principal that created it
commit / reset offsets                  Read on the group and on each topic
delete offsets                          Delete on the group, Read on each topic
group offsets, lag, members, describe   Describe on the group; topics the principal cannot Describe are left out
group lists                             only the groups the principal may Describe
InitProducerId                          Write on the transactional id; idempotent only: IdempotentWrite on the
                                        cluster, or Write on some topic (KIP-679)
transactions                            Describe (lists filtered) / Write on the transactional id; a
                                        transaction's offsets also Read on the group
======================================  =====================================================================

A denial raises :class:`~lakelog.security.errors.AuthorizationError` (403 / 40301, naming the operation and
the resource) and is logged by the authorizer. Every operation checks what it needs for the caller of its
:class:`~lakelog.requests.context.RequestContext`, whatever a front door checked before; a front door may
also check early, before it reads a request's body (the HTTP gateway in its route dependencies,
:mod:`lakelog.ingest_api.permissions`), so a principal that may not Describe a topic gets the same 403 for
a topic that exists and for one that does not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from lakelog.requests.context import RequestContext
from lakelog.security.acls import CLUSTER_NAME, Operation, ResourceType
from lakelog.security.authorizer import Authorizer
from lakelog.security.errors import AuthorizationError

log = logging.getLogger(__name__)

__all__ = ["RequestPermissions"]


class RequestPermissions:
    """One request's principal and address before the broker's authorizer.

    Args:
        authorizer: the broker's :class:`~lakelog.security.authorizer.Authorizer`.
        principal: ``User:name`` of the request.
        host: the client's IP address (``-`` when unknown).
    """

    __slots__ = ("authorizer", "principal", "host")

    def __init__(self, *, authorizer: Authorizer, principal: str, host: str) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host

    @classmethod
    def of(cls, authorizer: Authorizer, context: RequestContext) -> RequestPermissions:
        """The permissions of ``context``'s principal from its address, before ``authorizer``."""
        return cls(authorizer=authorizer, principal=context.principal, host=context.host)

    @property
    def enabled(self) -> bool:
        """Whether the broker checks ACLs at all (``authorizer.enabled``)."""
        return self.authorizer.enabled

    def require(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> None:
        """Allow or raise.

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming the operation and the resource.
        """
        self.authorizer.check(principal=self.principal, host=self.host, operation=operation,
                              resource_type=resource_type, name=name)

    def require_all(self, operation: Operation, resource_type: ResourceType, names: Iterable[str]) -> None:
        """:meth:`require` on each name (sorted and once each: the first denied one is named).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301.
        """
        if self.enabled:
            for name in sorted(set(names)):
                self.require(operation, resource_type, name)

    def allows(self, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether the principal may (no log line, no error: for filtering)."""
        return not self.enabled or self.authorizer.acls.authorize(
            principal=self.principal, host=self.host, operation=operation, resource_type=resource_type, name=name)

    def filter(self, operation: Operation, resource_type: ResourceType, names: Iterable[str]) -> list[str]:
        """The names the principal may do ``operation`` on, in their order (Kafka filters lists this way:
        Metadata, ListGroups, ListTransactions, OffsetFetch)."""
        names = list(names)
        if not self.enabled:
            return names
        return [n for n in names if self.allows(operation, resource_type, n)]

    def topic_filter(self, operation: Operation) -> Callable[[list[str]], list[str]]:
        """A function keeping the topic names the principal may do ``operation`` on (:meth:`filter`)."""
        return lambda names: self.filter(operation, ResourceType.TOPIC, names)

    def require_owner(self, *, owner: str, what: str) -> None:
        """Only ``owner`` (a principal) may use ``what`` (a consumer instance: REST Proxy's instances belong to
        the principal that created them). Checked whatever ``authorizer.enabled`` says: with
        ``authentication.methods=none`` every request is the same principal.

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming ``what``.
        """
        if owner != self.principal:
            log.warning("denied %s the %s of %s from %s", self.principal, what, owner, self.host)
            raise AuthorizationError(f"{self.principal} may not use {what}: it belongs to the principal that "
                                     f"created it; create your own.")

    def require_create_topic(self, name: str) -> None:
        """CreateTopics: Create on the cluster, else Create on the topic (Kafka's ``handleCreateTopicsRequest``).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming the topic.
        """
        if not self.allows(Operation.CREATE, ResourceType.CLUSTER):
            self.require(Operation.CREATE, ResourceType.TOPIC, name)

    def require_idempotent_write(self, topics: Iterable[str]) -> None:
        """InitProducerId without a transactional id: IdempotentWrite on the cluster, or Write on one of
        ``topics`` (the cluster's topics; KIP-679 makes Write on any topic enough).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301 naming IdempotentWrite on the cluster.
        """
        if self.allows(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER):
            return
        if any(self.allows(Operation.WRITE, ResourceType.TOPIC, t) for t in topics):
            return
        self.require(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)

    def require_produce(self, topic: str, *, transactional_id: str | None = None) -> None:
        """Produce: Write on ``topic`` and, for a transactional request, Write on its transactional id
        first (Kafka's ``handleProduceRequest``).

        Raises:
            lakelog.security.errors.AuthorizationError: 403 / 40301.
        """
        if self.enabled:
            if transactional_id is not None:
                self.require(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
            self.require(Operation.WRITE, ResourceType.TOPIC, topic)
