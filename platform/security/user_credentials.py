"""Users' SCRAM credentials in ZooKeeper, where Kafka keeps them (``/config/users/{name}``).

One znode per user, ``/lakelog/config/users/{percent-encoded name}``, with Kafka's JSON, one credential per
SCRAM mechanism (each with its own salt), as Kafka's ``kafka-configs --alter --add-config
'SCRAM-SHA-256=[password=...],SCRAM-SHA-512=[password=...]'`` writes them:
``{"version": 1, "config": {"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,iterations=4096",
"SCRAM-SHA-512": "salt=...,..."}}`` (:class:`~lakelog.security.scram.ScramCredential`). Setting a password
writes both; the SCRAM-SHA-512 entry is what makes a user (HTTP Basic and SASL PLAIN check passwords
against it; a user whose password was set before SCRAM-SHA-256 credentials were written has none until
its password is set again). Passwords are never stored. As in Kafka, the same
``config`` map holds the user's client quotas (:mod:`~lakelog.security.quotas`): setting or deleting a
credential keeps them, and a znode with quotas but no credential is not a user. ``lakelog users`` and the
``/lakelog/v1/users`` routes write them; brokers read them to check HTTP Basic credentials and the Kafka
listener's SASL PLAIN and SCRAM exchanges.
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from lakelog.replication.metadata import ROOT
from lakelog.replication.zookeeper_errors import zookeeper_errors_wrapped
from lakelog.security.errors import InvalidCredentialError, UnknownUserError
from lakelog.security.scram import MECHANISM, MECHANISMS, ScramCredential

__all__ = ["USERS_PATH", "UserCredentials", "has_credential", "user_path", "znode_config"]

#: Root of the users' credential znodes.
USERS_PATH = f"{ROOT}/config/users"


def user_path(name: str, *, root: str = USERS_PATH) -> str:
    """The znode of a user: ``{root}/{percent-encoded name}`` (``/``, ``.`` and ``%`` encoded)."""
    return f"{root}/{quote(name, safe='').replace('.', '%2E')}"


def _check_name(name: str) -> str:
    if not name or name != name.strip():
        raise InvalidCredentialError(f"Invalid user name {name!r}: it must be non-empty, without leading or "
                                     "trailing spaces")
    return name


@zookeeper_errors_wrapped
class UserCredentials:
    """Add, read, list and delete users' SCRAM credentials in ZooKeeper.

    Every public method raises :class:`~lakelog.replication.errors.ZooKeeperUnavailableError` (503 / 50304,
    retriable), never kazoo's error, when ZooKeeper is not reachable (:mod:`lakelog.replication.zookeeper_errors`).

    Args:
        zk: a started kazoo client (the cluster's chroot).
        root: the users' tree. Default: :data:`USERS_PATH`.
    """

    def __init__(self, zk: KazooClient, *, root: str = USERS_PATH) -> None:
        self.zk = zk
        self.root = root

    def upsert(self, name: str, password: str, *, iterations: int = 4096) -> None:
        """Set ``name``'s password: a credential per SCRAM mechanism (:data:`~lakelog.security.scram.MECHANISMS`),
        a new salt each time (Kafka's AlterUserScramCredentials upsertion).

        Raises:
            InvalidCredentialError: an invalid name or password, or iterations out of range.
        """
        credentials = {mechanism: ScramCredential.from_password(password, iterations=iterations, mechanism=mechanism)
                       for mechanism in MECHANISMS}
        path = user_path(_check_name(name), root=self.root)
        while True:  # compare-and-set: the znode's other configs (client quotas) stay
            try:
                old, stat = self.zk.get(path)
            except NoNodeError:
                old, stat = b"", None
            config = {**znode_config(old), **{m: c.to_text() for m, c in credentials.items()}}
            data = json.dumps({"version": 1, "config": config}, sort_keys=True).encode()
            try:
                if stat is None:
                    self.zk.create(path, data, makepath=True)
                else:
                    self.zk.set(path, data, version=stat.version)
                return
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue

    def get(self, name: str, *, mechanism: str = MECHANISM) -> ScramCredential:
        """``name``'s credential of ``mechanism`` (default SCRAM-SHA-512).

        Raises:
            UnknownUserError: no such user (or none of that mechanism).
        """
        try:
            data, _ = self.zk.get(user_path(name, root=self.root))
        except NoNodeError:
            data = b""
        if mechanism not in znode_config(data):
            raise UnknownUserError(f"No user {name!r}: add one with lakelog users add")
        return credential_of(data, mechanism=mechanism)

    def names(self) -> list[str]:
        """Every user with a credential, sorted (not the znodes that hold only client quotas)."""
        try:
            children = self.zk.get_children(self.root)
        except NoNodeError:
            return []
        names = []
        for child in children:
            try:
                data, _ = self.zk.get(f"{self.root}/{child}")
            except NoNodeError:
                continue
            if MECHANISM in znode_config(data):
                names.append(unquote(child))
        return sorted(names)

    def delete(self, name: str) -> None:
        """Remove ``name``'s credential.

        Raises:
            UnknownUserError: no such user.
        """
        path = user_path(name, root=self.root)
        while True:  # the znode goes only when nothing else (client quotas) is in it
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                data, stat = b"", None
            config = znode_config(data)
            if stat is None or config.pop(MECHANISM, None) is None:
                raise UnknownUserError(f"No user {name!r}")
            for mechanism in MECHANISMS:
                config.pop(mechanism, None)
            try:
                if not config and stat.numChildren == 0:
                    self.zk.delete(path, version=stat.version)
                else:
                    self.zk.set(path, json.dumps({"version": 1, "config": config}, sort_keys=True).encode(),
                                version=stat.version)
                return
            except (BadVersionError, NoNodeError, NotEmptyError):
                continue


def znode_config(data: bytes | None) -> dict:
    """The ``config`` map of a ``/lakelog/config/...`` znode's JSON, Kafka's ``{"version": 1, "config": {...}}``
    (``{}`` when empty or not Kafka's JSON): SCRAM credentials and client quotas side by side."""
    if not data:
        return {}
    try:
        config = json.loads(data).get("config")
    except (ValueError, AttributeError):
        return {}
    return dict(config) if isinstance(config, dict) else {}


def has_credential(data: bytes | None) -> bool:
    """Whether a user znode's data holds a SCRAM-SHA-512 credential (a znode may hold only client quotas)."""
    return MECHANISM in znode_config(data)


def credential_of(data: bytes, *, mechanism: str = MECHANISM) -> ScramCredential:
    """The ``mechanism`` (default SCRAM-SHA-512) credential of a user znode's data.

    Raises:
        InvalidCredentialError: not Kafka's JSON, or no entry of that mechanism.
    """
    try:
        return ScramCredential.from_text(json.loads(data)["config"][mechanism], mechanism=mechanism)
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidCredentialError(f"Not a user credential znode: {e}") from None
