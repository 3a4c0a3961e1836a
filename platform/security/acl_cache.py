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
import threading
from types import MappingProxyType
from typing import Mapping

from kazoo.client import KazooClient
from kazoo.recipe.cache import TreeCache, TreeEvent

from lakelog.security.acl_store import ACLS_PATH, entries_from_json, pattern_of_path
from lakelog.security.acls import AccessControlEntry, Operation, ResourcePattern, ResourceType, authorize
from lakelog.security.errors import SecurityError

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
        self._initialized = threading.Event()
        self._tree: TreeCache | None = None

    def start(self, *, timeout_s: float = 30.0) -> "AclCache":
        """Load every ACL and follow changes; returns once the first load is complete.

        Raises:
            SecurityError: the tree was not loaded within ``timeout_s`` seconds.
        """
        self.zk.ensure_path(self.root)
        self._tree = TreeCache(self.zk, self.root)
        self._tree.listen(self._on_event)
        self._tree.start()
        if not self._initialized.wait(timeout_s):
            raise SecurityError(f"ACLs not loaded from ZooKeeper ({self.root}) within {timeout_s} s")
        return self

    def close(self) -> None:
        """Stop following ZooKeeper (the cache keeps what it has)."""
        if self._tree is not None:
            self._tree.close()
            self._tree = None

    def _on_event(self, event: TreeEvent) -> None:
        if event.event_type == TreeEvent.INITIALIZED:
            self._initialized.set()
            return
        if event.event_data is None or event.event_type not in (TreeEvent.NODE_ADDED, TreeEvent.NODE_UPDATED,
                                                                TreeEvent.NODE_REMOVED):
            return
        pattern = pattern_of_path(event.event_data.path, root=self.root)
        if pattern is None:
            return
        if event.event_type == TreeEvent.NODE_REMOVED:
            self._acls.pop(pattern, None)
            return
        try:
            entries = entries_from_json(event.event_data.data)
        except Exception as e:  # noqa: BLE001 - a broken znode must not stop the cache
            # keep what the pattern held (its Deny entries above all): dropping them could open the resource
            log.error("unreadable ACL znode %s (%s): keeping its last good entries", event.event_data.path, e)
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
