"""The broker's authorizer (``authorizer.enabled``): may this principal do this operation on this resource?

Kafka's ``AclAuthorizer`` over the ACLs in ZooKeeper (:class:`~lakelog.security.acl_cache.AclCache`, a
kazoo ``TreeCache``), with ``super.users`` and ``allow.everyone.if.no.acl.found``. The brokers' own
principal (``User:{inter.broker.username}``) is always a super user, as Kafka deployments list their
brokers in ``super.users``: replica fetch, forwarding and the coordinators' internal routes need
``ClusterAction`` on the cluster, which no client has unless an ACL grants it.

A denial raises :class:`~lakelog.security.errors.AuthorizationError` (403 / 40301) naming the operation
and the resource, and is logged with the principal and the client's address. Disabled (the default),
:meth:`Authorizer.check` allows everything.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient

from lakelog.security.acl_cache import AclCache
from lakelog.security.acls import CLUSTER_NAME, Operation, ResourceType, parse_principal
from lakelog.security.errors import AuthorizationError

log = logging.getLogger(__name__)

__all__ = ["Authorizer", "parse_super_users"]


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by ``;`` (``User:admin;User:ops``); empty: none.

    Raises:
        lakelog.security.errors.InvalidAclError: an entry that is not ``Type:name``.
    """
    return frozenset(parse_principal(p) for p in text.split(";") if p.strip())


class Authorizer:
    """Decides requests from the cluster's ACLs (when enabled).

    Args:
        enabled: ``authorizer.enabled``. False: every request is allowed.
        zk: a started kazoo client of the cluster (the ACLs).
        super_users: ``super.users`` principals; the brokers' principal is added by the caller.
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found``. Default: False.
    """

    def __init__(self, *, enabled: bool, zk: KazooClient, super_users: frozenset[str] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.enabled = enabled
        self.acls = AclCache(zk, super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found)

    def start(self) -> "Authorizer":
        """Load the ACLs and follow them (when enabled)."""
        if self.enabled:
            self.acls.start()
        return self

    def close(self) -> None:
        """Stop following the ACLs."""
        self.acls.close()

    def check(self, *, principal: str, host: str, operation: Operation, resource_type: ResourceType,
              name: str = CLUSTER_NAME) -> None:
        """Allow the request or raise.

        Raises:
            AuthorizationError: 403 / 40301, naming the operation and the resource.
        """
        if not self.enabled or self.acls.authorize(principal=principal, host=host, operation=operation,
                                                   resource_type=resource_type, name=name):
            return
        log.warning("denied %s %s on %s %r from %s", principal, operation.value, resource_type.value, name, host)
        raise AuthorizationError(f"{principal} is not authorized to {operation.value} on {resource_type.value} "
                                 f"{name!r}: an ACL must allow it (lakelog acls add).")
