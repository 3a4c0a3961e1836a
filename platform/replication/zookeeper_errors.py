"""Where kazoo's "ZooKeeper is not reachable right now" errors become lakelog's
:class:`~lakelog.replication.errors.ZooKeeperUnavailableError` (503 / 50304, retriable).

kazoo raises ``ConnectionLoss`` (the connection dropped mid-call), ``SessionExpiredError`` (the session
ended; the broker's session listener re-registers it), ``ConnectionClosedError`` (the client is closing)
and ``KazooTimeoutError`` (no answer in time); all of them mean "retry later", not a bug. They are wrapped
where they enter: every public method of :class:`~lakelog.replication.metadata.ClusterMetadata`, of
consumer group membership (:class:`~lakelog.consumer_groups.membership.GroupMembership`) and of the security
stores (:class:`~lakelog.security.acl_store.AclStore`, :class:`~lakelog.security.user_credentials.UserCredentials`,
:class:`~lakelog.security.quotas.store.QuotaStore`) (:func:`zookeeper_errors_wrapped`), and the direct calls
of the replication modules and of :class:`~lakelog.security.followed_tree.FollowedTree` (:func:`zookeeper_calls`).
The HTTP gateway answers the same error for a kazoo error met anywhere else, so every such answer is the
same 503 / 50304. Other kazoo errors (``NoNodeError``,
``NodeExistsError``, ``BadVersionError``) are answers, not outages: callers handle them and they pass
through unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from lakelog.replication.errors import ZooKeeperUnavailableError

__all__ = ["ZOOKEEPER_UNAVAILABLE", "unavailable_error", "zookeeper_calls", "zookeeper_errors_wrapped"]

#: kazoo errors that mean "ZooKeeper is not reachable right now", not a bug.
ZOOKEEPER_UNAVAILABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, KazooTimeoutError)

_Class = TypeVar("_Class", bound=type)


def unavailable_error(exc: BaseException) -> ZooKeeperUnavailableError:
    """The :class:`ZooKeeperUnavailableError` answering kazoo's ``exc`` (one of :data:`ZOOKEEPER_UNAVAILABLE`),
    naming its class."""
    return ZooKeeperUnavailableError(
        f"The broker lost its ZooKeeper connection ({type(exc).__name__}) while answering; retry.")


@contextlib.contextmanager
def zookeeper_calls(zk: KazooClient | None = None) -> Iterator[None]:
    """Raise :data:`ZOOKEEPER_UNAVAILABLE` errors of the block as :class:`ZooKeeperUnavailableError` (kazoo's
    error is its ``__cause__``).

    With ``zk``, a client whose connection is suspended now (it dropped: kazoo is trying the other
    servers, or the ensemble has no quorum) fails the block before it runs: kazoo would queue its calls
    until a server answers, holding the caller (and the locks it holds) for as long as the quorum is gone.
    A closed client or an expired session already fails each call at once, with kazoo's own error.

    Raises:
        ZooKeeperUnavailableError: 503 / 50304, retriable.
    """
    if zk is not None and zk.state == KazooState.SUSPENDED:
        raise ZooKeeperUnavailableError(
            "The broker is not connected to ZooKeeper (its server is gone, or the ensemble has no quorum); it "
            "reconnects by itself: retry.")
    try:
        yield
    except ZOOKEEPER_UNAVAILABLE as e:
        raise unavailable_error(e) from e


def _wrapped(func: Callable) -> Callable:
    @functools.wraps(func)
    def call(self, *args, **kwargs):
        with zookeeper_calls(getattr(self, "zk", None)):
            return func(self, *args, **kwargs)

    return call


def zookeeper_errors_wrapped(cls: _Class) -> _Class:
    """Class decorator: every public method defined in ``cls``'s body (a plain function, not a property,
    static or class method) runs in :func:`zookeeper_calls` with the instance's ``zk`` client (if it has
    one), so its callers meet :class:`ZooKeeperUnavailableError`, never kazoo's errors, and at once while
    the client's connection is suspended."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _wrapped(member))
    return cls
