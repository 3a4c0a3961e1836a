"""A broker's copy of the ACLs, kept current with a kazoo ``TreeCache`` on the ACL tree.

Kafka's ``AclAuthorizer`` loads every ACL from ZooKeeper at start and then follows change notifications;
here a ``TreeCache`` (kazoo's recipe: watches on every znode of ``/lakelog/acls``) does both, and each
event replaces the entries of the one pattern whose znode changed. :meth:`AclCache.authorize` decides
from memory (:func:`lakelog.security.acls.authorize`): no ZooKeeper read on a request's path.

A change made with :class:`~lakelog.security.acl_store.AclStore` reaches every broker's cache within
ZooKeeper's watch latency (milliseconds); until then a broker decides with the ACLs it had, as Kafka's
brokers do between a change and its notification.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Mapping

from kazoo.client import KazooClient

from lakelog.security.acl_store import ACLS_PATH, entries_from_json, pattern_of_path
from lakelog.security.acls import AccessControlEntry, Operation, ResourcePattern, ResourceType, authorize
from lakelog.security.followed_tree import FollowedTree

log = logging.getLogger(__name__)

__all__ = ["AclCache"]


class AclCache:
    """Every ACL of the cluster in memory, by resource pattern, following ZooKeeper.

    Args:
        zk: a started kazoo client (the cluster's chroot).
        super_users: principals allowed everything (``super.users``). Default: none.
        allow_everyone_if_no_acl_found: the decision for a resource no ACL applies to
            (``allow.everyone.if.no.acl.found``). Default: False.
        root: the ACL tree. Default: :data:`~lakelog.security.acl_store.ACLS_PATH`.
    """

    def __init__(self, zk: KazooClient, *, super_users: frozenset[str] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False, root: str = ACLS_PATH) -> None:
        self.zk = zk
        self.root = root
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._tree = FollowedTree(zk, root, self._on_node, what="ACLs")

    def start(self, *, timeout_s: float = 30.0) -> "AclCache":
        """Load every ACL and follow changes; returns once the first load is complete.

        Raises:
            SecurityError: the tree was not loaded within ``timeout_s`` seconds.
        """
        self._tree.start(timeout_s=timeout_s)
        return self

    def close(self) -> None:
        """Stop following ZooKeeper (the cache keeps what it has)."""
        self._tree.close()

    def _on_node(self, path: str, data: bytes | None) -> None:
        pattern = pattern_of_path(path, root=self.root)
        if pattern is None:
            return
        if data is None:
            self._acls.pop(pattern, None)
            return
        try:
            entries = entries_from_json(data)
        except Exception as e:  # noqa: BLE001 - a broken znode must not stop the cache
            # keep what the pattern held (its Deny entries above all): dropping them could open the resource
            log.error("unreadable ACL znode %s (%s): keeping its last good entries", path, e)
            return
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)

    @property
    def acls(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        """The ACLs now, by pattern (a read-only view)."""
        return MappingProxyType(self._acls)

    def authorize(self, *, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        """:func:`lakelog.security.acls.authorize` over the cached ACLs with this cache's settings."""
        return authorize(self._acls, principal=principal, host=host, operation=operation,
                         resource_type=resource_type, name=name, super_users=self.super_users,
                         allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found)
