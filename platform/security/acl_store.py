"""ACLs in ZooKeeper: add, list and remove them (what ``lakelog acls`` and ``/v3/clusters/{c}/acls`` do).

Layout, as Kafka keeps ACLs in ZooKeeper (``/kafka-acl/{type}/{name}``, and
``/kafka-acl-extended/prefixed/{type}/{name}`` for KIP-290's prefixed patterns): one znode per resource
pattern, ``/lakelog/acls/{Literal|Prefixed}/{ResourceType}/{name}``, holding the JSON of its entries,
``{"version": 1, "acls": [{"principal", "permissionType", "operation", "host"}, ...]}``
(:meth:`~lakelog.security.acls.AccessControlEntry.to_zookeeper`). Names are percent-encoded (``/``, ``.``
and ``*`` included) so that any resource name is a valid znode name.

Every change of a pattern's znode is a compare-and-set on its version (create when absent, delete when
no entry is left), retried on a concurrent change, so two admins adding ACLs to the same resource at once
both get theirs, as Kafka's ``updateResourceAcls``. Brokers see changes through
:class:`~lakelog.security.acl_cache.AclCache` (a kazoo ``TreeCache`` on the same tree).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from lakelog.replication.metadata import ROOT
from lakelog.replication.zookeeper_errors import zookeeper_errors_wrapped
from lakelog.security.acls import (AccessControlEntry, AclBinding, AclFilter, PatternType, ResourcePattern,
                                   ResourceType)

__all__ = ["ACLS_PATH", "AclStore", "pattern_of_path", "pattern_path"]

#: Root of the ACL znodes.
ACLS_PATH = f"{ROOT}/acls"


def pattern_path(pattern: ResourcePattern, *, root: str = ACLS_PATH) -> str:
    """The znode of a pattern: ``{root}/{Literal|Prefixed}/{ResourceType}/{percent-encoded name}``."""
    name = quote(pattern.name, safe="").replace(".", "%2E").replace("*", "%2A")
    return f"{root}/{pattern.pattern_type.value}/{pattern.resource_type.value}/{name}"


def pattern_of_path(path: str, *, root: str = ACLS_PATH) -> ResourcePattern | None:
    """The pattern of a znode :func:`pattern_path` made; None for any other path under ``root`` (or outside it)."""
    if not path.startswith(root + "/"):
        return None
    parts = path[len(root) + 1:].split("/")
    if len(parts) != 3:
        return None
    try:
        return ResourcePattern(ResourceType.parse(parts[1]), unquote(parts[2]), PatternType.parse(parts[0]))
    except Exception:  # noqa: BLE001 - a znode someone else put there: not an ACL
        return None


def entries_from_json(data: bytes) -> frozenset[AccessControlEntry]:
    """The entries of a pattern's znode data (empty data: none)."""
    if not data:
        return frozenset()
    return frozenset(AccessControlEntry.from_zookeeper(e) for e in json.loads(data).get("acls", []))


def entries_to_json(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern's znode data, entries in a stable order."""
    acls = sorted((e.to_zookeeper() for e in entries), key=lambda d: tuple(sorted(d.items())))
    return json.dumps({"version": 1, "acls": acls}, sort_keys=True).encode()


@zookeeper_errors_wrapped
class AclStore:
    """Adds, lists and removes ACLs in ZooKeeper (the admin side; brokers read :class:`AclCache`).

    Every public method raises :class:`~lakelog.replication.errors.ZooKeeperUnavailableError` (503 / 50304,
    retriable), never kazoo's error, when ZooKeeper is not reachable (:mod:`lakelog.replication.zookeeper_errors`).

    Args:
        zk: a started kazoo client (its chroot is the cluster's).
        root: the ACL tree. Default: :data:`ACLS_PATH`.
    """

    def __init__(self, zk: KazooClient, *, root: str = ACLS_PATH) -> None:
        self.zk = zk
        self.root = root

    def _update(self, pattern: ResourcePattern, change) -> None:
        """Apply ``change(entries) -> entries`` to a pattern's znode with compare-and-set, until it sticks."""
        path = pattern_path(pattern, root=self.root)
        while True:
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                new = change(frozenset())
                if not new:
                    return
                try:
                    self.zk.create(path, entries_to_json(new), makepath=True)
                    return
                except NodeExistsError:
                    continue  # created meanwhile: change that
            old = entries_from_json(data)
            new = change(old)
            if new == old:
                return
            try:
                if new:
                    self.zk.set(path, entries_to_json(new), version=stat.version)
                else:
                    self.zk.delete(path, version=stat.version)
                return
            except (BadVersionError, NoNodeError, NotEmptyError):
                continue  # changed meanwhile: read again

    def add(self, acls: Iterable[AclBinding]) -> None:
        """Store ``acls`` (adding an ACL that is there already changes nothing)."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for acl in acls:
            by_pattern.setdefault(acl.pattern, set()).add(acl.entry)
        for pattern, entries in by_pattern.items():
            self._update(pattern, lambda old, entries=entries: old | entries)

    def patterns(self) -> list[ResourcePattern]:
        """Every pattern that has a znode."""
        out = []
        for ptype in PatternType:
            for rtype in ResourceType:
                base = f"{self.root}/{ptype.value}/{rtype.value}"
                try:
                    children = self.zk.get_children(base)
                except NoNodeError:
                    continue
                out += [p for p in (pattern_of_path(f"{base}/{c}", root=self.root) for c in children) if p]
        return out

    def list(self, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        """The stored ACLs that pass ``acl_filter`` (all by default), read from ZooKeeper, sorted."""
        out = []
        for pattern in self.patterns():
            try:
                data, _ = self.zk.get(pattern_path(pattern, root=self.root))
            except NoNodeError:
                continue
            out += [a for a in (AclBinding(pattern, e) for e in entries_from_json(data)) if acl_filter.matches(a)]
        return sorted(out, key=_sort_key)

    def remove(self, acl_filter: AclFilter) -> list[AclBinding]:
        """Remove the stored ACLs that pass ``acl_filter``; returns them (Kafka's DeleteAcls answer)."""
        removed: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for pattern in self.patterns():
            def change(old: frozenset[AccessControlEntry], pattern=pattern) -> frozenset[AccessControlEntry]:
                gone = {e for e in old if acl_filter.matches(AclBinding(pattern, e))}
                removed[pattern] = gone  # the last attempt's (a retried compare-and-set saw another version)
                return old - gone
            self._update(pattern, change)
        return sorted((AclBinding(p, e) for p, gone in removed.items() for e in gone), key=_sort_key)


def _sort_key(acl: AclBinding) -> tuple:
    p, e = acl.pattern, acl.entry
    return (p.resource_type.value, p.pattern_type.value, p.name, e.principal, e.host, e.operation.value,
            e.permission.value)
