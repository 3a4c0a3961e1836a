"""What a broker knows of its ZooKeeper connection: connected or not, and how often it dropped or expired.

kazoo reports its connection's states to listeners (``KazooState``): ``SUSPENDED`` when the connection to a
ZooKeeper server dropped (kazoo then tries the other servers of ``zookeeper.connect``; the session lives on
for ``zookeeper.session.timeout.ms``), ``CONNECTED`` when it is connected again (to the same session, or to
a new one after an expiry), ``LOST`` when the session expired. Only ``LOST`` ends the broker's ephemeral
registration (and the broker's session listener handles it); a ``SUSPENDED`` broker keeps its session,
its registration and its leaderships, and goes on serving what needs no ZooKeeper write. What needs one
(topic creation, ISR changes) is refused with a retriable error while it is not connected
(:func:`lakelog.replication.zookeeper_errors.zookeeper_calls`).

:class:`ZooKeeperSession` counts the transitions for the metrics (Kafka's
``kafka.server:type=SessionExpireListener`` meters ``ZooKeeperDisconnectsPerSec`` and
``ZooKeeperExpiresPerSec``, and its ``SessionState`` gauge) and tells ``GET /ready`` whether the broker is
connected now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from kazoo.client import KazooClient, KazooState
from kazoo.retry import KazooRetry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

__all__ = ["RECONNECT_MAX_DELAY_S", "ZooKeeperSession", "connection_retry", "ensure_chroot"]

log = logging.getLogger(__name__)

#: The longest pause (seconds) between two rounds of connection attempts over every server of
#: ``zookeeper.connect``. kazoo doubles its pause after each round that found no serving server, up to an
#: hour by default: after a quorum outage of a minute its clients would come back half a minute late, and
#: their sessions (renewed when the quorum returns) could expire meanwhile. ZooKeeper's Java client, which
#: Kafka's brokers use, pauses at most a second too.
RECONNECT_MAX_DELAY_S = 1.0


def connection_retry() -> KazooRetry:
    """The broker's kazoo connection retry: forever, from 0.1 s doubling to :data:`RECONNECT_MAX_DELAY_S`."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_jitter=0.2, max_delay=RECONNECT_MAX_DELAY_S)


def ensure_chroot(zookeeper_connect: str, *, timeout_s: float = 30.0) -> str | None:
    """Create the chroot of ``zookeeper_connect`` (``host:port,host:port/chroot``) if it is missing, as Kafka's
    brokers do on start; returns the chroot, or None when there is none.

    A client with a chroot cannot create the chroot itself (every path it names is under it), so this
    connects once without it. ``timeout_s`` (seconds) bounds the connection.

    Raises:
        kazoo.handlers.threading.KazooTimeoutError: no ZooKeeper server answered within ``timeout_s``.
    """
    hosts, slash, chroot = zookeeper_connect.partition("/")
    if not chroot.strip("/"):
        return None
    chroot = slash + chroot.rstrip("/")
    client = KazooClient(hosts=hosts, timeout=timeout_s)
    client.start(timeout=timeout_s)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return chroot


class ZooKeeperSession:
    """The state of one kazoo client's connection, kept by a listener (:meth:`on_state`).

    Args:
        zk: the broker's kazoo client; :attr:`connected` reads its live state.

    Attributes:
        disconnects: connections that dropped (``SUSPENDED`` or ``LOST`` after ``CONNECTED``).
        expires: sessions that expired (``LOST``).
    """

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self.disconnects = 0
        self.expires = 0
        self._disconnected_at: float | None = None

    @property
    def connected(self) -> bool:
        """True while the client is connected to a ZooKeeper server that serves (it has a quorum)."""
        return bool(self.zk.connected)

    def disconnected_s(self) -> float:
        """Seconds since the connection dropped, 0.0 while connected."""
        since = self._disconnected_at
        return 0.0 if since is None or self.connected else time.monotonic() - since

    def on_state(self, state: str) -> None:
        """kazoo's listener (its thread): count a drop or an expiry, log a reconnection. Never blocks."""
        if state == KazooState.CONNECTED:
            if self._disconnected_at is not None:
                log.info("ZooKeeper connection back after %.1f s", time.monotonic() - self._disconnected_at)
            self._disconnected_at = None
            return
        if self._disconnected_at is None:
            self._disconnected_at = time.monotonic()
            self.disconnects += 1
        if state == KazooState.LOST:
            self.expires += 1

    def metric_families(self) -> Iterable[Metric]:
        """The connection's gauges and counters, read at scrape time."""
        yield GaugeMetricFamily(
            "lakelog_zookeeper_connected", "1 while the broker is connected to a serving ZooKeeper server, else 0: "
            "topic creation and ISR changes are refused while it is 0 (Kafka's "
            "kafka.server:type=SessionExpireListener,name=SessionState).", value=int(self.connected))
        yield GaugeMetricFamily(
            "lakelog_zookeeper_disconnected_seconds", "Seconds since the ZooKeeper connection dropped; 0 while "
            "connected.", value=self.disconnected_s())
        yield CounterMetricFamily(
            "lakelog_zookeeper_disconnects", "ZooKeeper connections that dropped (Kafka's "
            "kafka.server:type=SessionExpireListener,name=ZooKeeperDisconnectsPerSec).", value=self.disconnects)
        yield CounterMetricFamily(
            "lakelog_zookeeper_expires", "ZooKeeper sessions that expired (Kafka's "
            "kafka.server:type=SessionExpireListener,name=ZooKeeperExpiresPerSec).", value=self.expires)
