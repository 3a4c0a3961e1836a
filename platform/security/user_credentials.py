"""Users' SCRAM-SHA-512 credentials in ZooKeeper, where Kafka keeps them (``/config/users/{name}``).

One znode per user, ``/lakelog/config/users/{percent-encoded name}``, with Kafka's JSON:
``{"version": 1, "config": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=4096"}}``
(:class:`~lakelog.security.scram.ScramCredential`). Passwords are never stored. ``lakelog users`` and the
``/lakelog/v1/users`` routes write them; brokers read them to check HTTP Basic credentials.
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from lakelog.replication.metadata import ROOT
from lakelog.security.errors import InvalidCredentialError, UnknownUserError
from lakelog.security.scram import MECHANISM, ScramCredential

__all__ = ["USERS_PATH", "UserCredentials", "user_path"]

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


class UserCredentials:
    """Add, read, list and delete users' SCRAM credentials in ZooKeeper.

    Args:
        zk: a started kazoo client (the cluster's chroot).
        root: the users' tree. Default: :data:`USERS_PATH`.
    """

    def __init__(self, zk: KazooClient, *, root: str = USERS_PATH) -> None:
        self.zk = zk
        self.root = root

    def upsert(self, name: str, password: str, *, iterations: int = 4096) -> None:
        """Set ``name``'s password (a new salt each time; Kafka's AlterUserScramCredentials upsertion).

        Raises:
            InvalidCredentialError: an invalid name or password, or iterations out of range.
        """
        credential = ScramCredential.from_password(password, iterations=iterations)
        data = json.dumps({"version": 1, "config": {MECHANISM: credential.to_text()}}, sort_keys=True).encode()
        path = user_path(_check_name(name), root=self.root)
        try:
            self.zk.create(path, data, makepath=True)
        except NodeExistsError:
            self.zk.set(path, data)

    def get(self, name: str) -> ScramCredential:
        """``name``'s credential.

        Raises:
            UnknownUserError: no such user.
        """
        try:
            data, _ = self.zk.get(user_path(name, root=self.root))
        except NoNodeError:
            raise UnknownUserError(f"No user {name!r}: add one with lakelog users add") from None
        return credential_of(data)

    def names(self) -> list[str]:
        """Every user with a credential, sorted."""
        try:
            return sorted(unquote(c) for c in self.zk.get_children(self.root))
        except NoNodeError:
            return []

    def delete(self, name: str) -> None:
        """Remove ``name``'s credential.

        Raises:
            UnknownUserError: no such user.
        """
        try:
            self.zk.delete(user_path(name, root=self.root))
        except NoNodeError:
            raise UnknownUserError(f"No user {name!r}") from None


def credential_of(data: bytes) -> ScramCredential:
    """The SCRAM-SHA-512 credential of a user znode's data.

    Raises:
        InvalidCredentialError: not Kafka's JSON, or no SCRAM-SHA-512 entry.
    """
    try:
        return ScramCredential.from_text(json.loads(data)["config"][MECHANISM])
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidCredentialError(f"Not a user credential znode: {e}") from None
