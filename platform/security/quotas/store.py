"""Client quotas in ZooKeeper, where Kafka keeps them, and a broker's followed copy.

Znodes (Kafka's ``/config/users/...`` and ``/config/clients/...`` under ``/lakelog``), each with Kafka's JSON
``{"version": 1, "config": {"producer_byte_rate": "1048576", ...}}``:

- ``/lakelog/config/users/{user}``: the user's quotas, beside the user's SCRAM-SHA-512 credential in the same
  ``config`` map (:mod:`~lakelog.security.user_credentials`; writing one never drops the other);
- ``/lakelog/config/users/{user}/clients/{client-id}``;
- ``/lakelog/config/clients/{client-id}``.

Names are percent-encoded as users' names are (:func:`~lakelog.security.user_credentials.user_path`); the
default entity is the literal ``<default>`` (Kafka's), so a user named ``<default>`` is another znode.
Values are kept as strings (Kafka's) and read as floats.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from lakelog.replication.metadata import ROOT
from lakelog.replication.zookeeper_errors import zookeeper_errors_wrapped
from lakelog.security.errors import InvalidQuotaError
from lakelog.security.followed_tree import FollowedTree
from lakelog.security.quotas.entities import DEFAULT, QUOTA_CONFIGS, QuotaEntity
from lakelog.security.user_credentials import USERS_PATH, znode_config

log = logging.getLogger(__name__)

__all__ = ["CLIENTS_PATH", "QuotaCache", "QuotaStore", "entity_of_path", "entity_path", "quotas_of_znode"]

#: Root of the client ids' quota znodes.
CLIENTS_PATH = f"{ROOT}/config/clients"


def _segment(name: str) -> str:
    return DEFAULT if name == DEFAULT else quote(name, safe="").replace(".", "%2E")


def entity_path(entity: QuotaEntity, *, users_root: str = USERS_PATH, clients_root: str = CLIENTS_PATH) -> str:
    """The znode of a quota entity (see the module docstring).

    Raises:
        InvalidQuotaError: an entity with neither a user nor a client id, or an empty name.
    """
    for name in (entity.user, entity.client_id):
        if name is not None and (not name or name != name.strip()):
            raise InvalidQuotaError(f"Invalid quota entity name {name!r}: give a non-empty name without leading or "
                                    f"trailing spaces, or {DEFAULT}")
    if entity.user is not None:
        path = f"{users_root}/{_segment(entity.user)}"
        return path if entity.client_id is None else f"{path}/clients/{_segment(entity.client_id)}"
    if entity.client_id is None:
        raise InvalidQuotaError("A quota entity needs a user (--user), a client id (--client-id) or both")
    return f"{clients_root}/{_segment(entity.client_id)}"


def entity_of_path(path: str, *, users_root: str = USERS_PATH, clients_root: str = CLIENTS_PATH) -> QuotaEntity | None:
    """The quota entity of a znode path under either root; None for other znodes (the roots, ``.../clients``)."""
    if path.startswith(users_root + "/"):
        parts = path[len(users_root) + 1:].split("/")
        if len(parts) == 1:
            return QuotaEntity(unquote(parts[0]), None)
        if len(parts) == 3 and parts[1] == "clients":
            return QuotaEntity(unquote(parts[0]), unquote(parts[2]))
    elif path.startswith(clients_root + "/"):
        parts = path[len(clients_root) + 1:].split("/")
        if len(parts) == 1:
            return QuotaEntity(None, unquote(parts[0]))
    return None


def quotas_of_znode(data: bytes | None) -> dict[str, float]:
    """The client quotas of a znode's data: ``{"producer_byte_rate": 1048576.0, ...}`` (other keys, as a
    SCRAM credential, and unreadable values left out)."""
    out = {}
    for key, value in znode_config(data).items():
        if key in QUOTA_CONFIGS:
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                log.error("ignoring the unreadable client quota %s=%r", key, value)
    return out


def check_quota_value(key: str, value: float) -> float:
    """``value`` of quota ``key`` as a float.

    Raises:
        InvalidQuotaError: an unknown key, or a value that is not a finite number > 0.
    """
    if key not in QUOTA_CONFIGS:
        raise InvalidQuotaError(f"Unknown client quota {key!r}: use one of {', '.join(QUOTA_CONFIGS)}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise InvalidQuotaError(f"Client quota {key}={value!r}: give a number > 0 ({QUOTA_CONFIGS[key]}); delete "
                                "the quota to lift the limit")
    return number


def _text(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


@zookeeper_errors_wrapped
class QuotaStore:
    """Read and change client quotas in ZooKeeper (Kafka's DescribeClientQuotas / AlterClientQuotas, KIP-546).

    Every public method raises :class:`~lakelog.replication.errors.ZooKeeperUnavailableError` (503 / 50304,
    retriable), never kazoo's error, when ZooKeeper is not reachable (:mod:`lakelog.replication.zookeeper_errors`).

    Args:
        zk: a started kazoo client (the cluster's chroot).
        users_root, clients_root: the trees. Default: :data:`~lakelog.security.user_credentials.USERS_PATH`,
            :data:`CLIENTS_PATH`.
    """

    def __init__(self, zk: KazooClient, *, users_root: str = USERS_PATH, clients_root: str = CLIENTS_PATH) -> None:
        self.zk = zk
        self.users_root = users_root
        self.clients_root = clients_root

    def _path(self, entity: QuotaEntity) -> str:
        return entity_path(entity, users_root=self.users_root, clients_root=self.clients_root)

    def alter(self, entity: QuotaEntity, *, set: Mapping[str, float] | None = None, remove: Iterable[str] = (),
              validate_only: bool = False) -> dict[str, float]:
        """Set and remove quotas of one entity in one change (other keys of the znode, as a SCRAM credential,
        stay); a znode left with no config and no children is deleted.

        Returns:
            The entity's quotas after the change.

        Raises:
            InvalidQuotaError: an invalid entity, key or value, or a key both set and removed; nothing written.
        """
        path = self._path(entity)
        new = {k: check_quota_value(k, v) for k, v in (set or {}).items()}
        removed = list(remove)
        for key in removed:
            if key not in QUOTA_CONFIGS:
                raise InvalidQuotaError(f"Unknown client quota {key!r}: use one of {', '.join(QUOTA_CONFIGS)}")
            if key in new:
                raise InvalidQuotaError(f"Client quota {key} is both set and deleted: do one of the two")
        if validate_only:
            return {**{k: v for k, v in self.get(entity).items() if k not in removed}, **new}
        while True:  # compare-and-set: a concurrent credential or quota change is never lost
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                data, stat = None, None
            config = znode_config(data)
            for key in removed:
                config.pop(key, None)
            config.update({k: _text(v) for k, v in new.items()})
            try:
                self._write(path, config, stat)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            return quotas_of_znode(json.dumps({"config": config}).encode())

    def _write(self, path: str, config: dict[str, str], stat) -> None:
        body = json.dumps({"version": 1, "config": config}, sort_keys=True).encode()
        if stat is None:
            if config:
                self.zk.create(path, body, makepath=True)
            return
        if not config and stat.numChildren == 0:
            try:
                self.zk.delete(path, version=stat.version)
                return
            except NotEmptyError:
                pass
        self.zk.set(path, body, version=stat.version)

    def get(self, entity: QuotaEntity) -> dict[str, float]:
        """The quotas set on exactly this entity (``{}`` when none)."""
        try:
            data, _ = self.zk.get(self._path(entity))
        except NoNodeError:
            return {}
        return quotas_of_znode(data)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def describe(self, *, user: str | None = None, client_id: str | None = None,
                 strict: bool = False) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """Every entity with quotas that matches the filter, sorted (Kafka's DescribeClientQuotas, KIP-546).

        Args:
            user: only entities with this user (a name or :data:`~lakelog.security.quotas.entities.DEFAULT`);
                None: any or none.
            client_id: likewise for the client id.
            strict: only entities with no other part than the filtered ones (``user="alice", strict=True``:
                ``user=alice`` only, not ``user=alice, client-id=...``).

        Returns:
            ``[(entity, {quota: value})]``.
        """
        entities: list[QuotaEntity] = []
        for u in self._children(self.users_root):
            entities.append(QuotaEntity(unquote(u), None))
            entities.extend(QuotaEntity(unquote(u), unquote(c))
                            for c in self._children(f"{self.users_root}/{u}/clients"))
        entities.extend(QuotaEntity(None, unquote(c)) for c in self._children(self.clients_root))
        out = []
        for entity in entities:
            if user is not None and entity.user != user or client_id is not None and entity.client_id != client_id:
                continue
            if strict and ((user is None) != (entity.user is None) or (client_id is None) != (entity.client_id is None)):
                continue
            quotas = self.get(entity)
            if quotas:
                out.append((entity, quotas))
        return out


class QuotaCache:
    """The cluster's client quotas as a broker sees them: followed from ZooKeeper with kazoo ``TreeCache`` s
    (:class:`~lakelog.security.followed_tree.FollowedTree`), read without I/O on each request.

    Args:
        zk: a started kazoo client (the broker's).
        users_root, clients_root: the trees followed. Default: as :class:`QuotaStore`.

    Attributes:
        by_type: quota name -> ``{entity: value}`` of the entities that set it (empty when none does).
    """

    def __init__(self, zk: KazooClient, *, users_root: str = USERS_PATH, clients_root: str = CLIENTS_PATH) -> None:
        self.users_root = users_root
        self.clients_root = clients_root
        self.by_type: dict[str, dict[QuotaEntity, float]] = {key: {} for key in QUOTA_CONFIGS}
        self._trees = [FollowedTree(zk, root, self._on_node, what="client quotas") for root in (users_root, clients_root)]

    def start(self, *, timeout_s: float = 30.0) -> "QuotaCache":
        """Load the quotas and follow their changes.

        Raises:
            SecurityError: not loaded within ``timeout_s``.
        """
        for tree in self._trees:
            tree.start(timeout_s=timeout_s)
        return self

    def close(self) -> None:
        """Stop following ZooKeeper."""
        for tree in self._trees:
            tree.close()

    @property
    def empty(self) -> bool:
        """True when no entity has a quota (requests need no quota work at all)."""
        return not any(self.by_type.values())

    def _on_node(self, path: str, data: bytes | None) -> None:
        entity = entity_of_path(path, users_root=self.users_root, clients_root=self.clients_root)
        if entity is None:
            return
        quotas = quotas_of_znode(data)
        for key, values in self.by_type.items():
            if key in quotas:
                values[entity] = quotas[key]
            else:
                values.pop(entity, None)
