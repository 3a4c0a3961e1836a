"""A ZooKeeper subtree kept in step with kazoo's ``TreeCache`` recipe: the ACLs and the users' credentials.

:class:`FollowedTree` starts a ``TreeCache`` on a root, waits for its first full load, and calls
``on_node(path, data)`` for each znode under it that appears or changes (``data`` its bytes) or goes
(``data`` None), on kazoo's event thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.recipe.cache import TreeCache, TreeEvent

from lakelog.replication.zookeeper_errors import zookeeper_calls
from lakelog.security.errors import SecurityError

__all__ = ["FollowedTree"]


class FollowedTree:
    """Follow the znodes under ``root`` (created if missing).

    Args:
        zk: a started kazoo client.
        root: the subtree.
        on_node: ``(path, data)`` for a znode added or changed, ``(path, None)`` for one removed (the root too).
        what: what the tree holds, for the error message.
    """

    def __init__(self, zk: KazooClient, root: str, on_node: Callable[[str, bytes | None], None], *, what: str) -> None:
        self.zk = zk
        self.root = root
        self.on_node = on_node
        self.what = what
        self._initialized = threading.Event()
        self._tree: TreeCache | None = None

    def start(self, *, timeout_s: float = 30.0) -> None:
        """Load the tree and follow it; returns once the first load is complete.

        Raises:
            SecurityError: not loaded within ``timeout_s`` seconds.
            ZooKeeperUnavailableError: ZooKeeper not reachable (503 / 50304, retriable).
        """
        with zookeeper_calls():
            self.zk.ensure_path(self.root)
        self._tree = TreeCache(self.zk, self.root)
        self._tree.listen(self._on_event)
        self._tree.start()
        if not self._initialized.wait(timeout_s):
            raise SecurityError(f"{self.what} not loaded from ZooKeeper ({self.root}) within {timeout_s} s")

    def close(self) -> None:
        """Stop following (what ``on_node`` built stays)."""
        if self._tree is not None:
            self._tree.close()
            self._tree = None

    def _on_event(self, event: TreeEvent) -> None:
        if event.event_type == TreeEvent.INITIALIZED:
            self._initialized.set()
        elif event.event_data is not None and event.event_type in (TreeEvent.NODE_ADDED, TreeEvent.NODE_UPDATED):
            self.on_node(event.event_data.path, event.event_data.data)
        elif event.event_data is not None and event.event_type == TreeEvent.NODE_REMOVED:
            self.on_node(event.event_data.path, None)
