"""A ZooKeeper ensemble on one machine: three or five :class:`ZooKeeperServer` nodes from the same jars.

ZooKeeper's operators run it replicated, an odd number of servers (three for staging, five for
production), so that losing one server loses nothing: a majority (two of three, three of five) keeps
serving. :class:`ZooKeeperEnsemble` lays such an ensemble out under one data dir, one node per
``node-{myid}/`` folder (its ``zoo.cfg``, ``myid``, data and log), every client, quorum and election port
chosen free on the host, and starts the nodes together (a node serves only once a majority runs)::

    with ZooKeeperEnsemble(data_dir=Path("data/zookeeper"), nodes=3) as ensemble:
        brokers_connect = ensemble.connect_string + "/lakelog"   # host:p1,host:p2,host:p3/chroot
        ensemble.node(2).kill(); ensemble.node(2).start()        # lose a node, bring it back

``lakelog cluster up --zookeeper-nodes 3`` runs one; across machines, run one
``lakelog zookeeper start --myid N --server 1=zk1:2888:3888 ...`` per host instead.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType

from lakelog.runtime.zookeeper_server import QuorumServer, ZooKeeperServer, free_port

__all__ = ["ZooKeeperEnsemble"]


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class ZooKeeperEnsemble:
    """A replicated ZooKeeper of ``nodes`` servers on one host, each a child process (:class:`ZooKeeperServer`).

    Args (keyword-only):
        data_dir: Node ``N``'s files go under ``data_dir/node-N/`` (``zoo.cfg``, ``myid``, its data and
            ``zookeeper.log``). Created if missing; kept, like a standalone server's.
        nodes: Number of servers, odd and at least 3 (a majority of them must run). Default: 3.
        host: Interface every port binds to, and the address the servers reach each other at.
            Default: 127.0.0.1.
        client_ports: Each node's client port, in ``myid`` order. Default: free ones.
        tick_time_ms: ZooKeeper's tick (ms); session timeouts must be 2 to 20 ticks. Default: 2000.
        heap_mb: Max Java heap of each node (MiB). Default: 256.

    The quorum and election ports are chosen free at construction. Raises :class:`ValueError` for an even
    or too small ``nodes``, or ``client_ports`` of another length. Use as a context manager, or call
    :meth:`start` and :meth:`stop`.
    """

    def __init__(self, *, data_dir: Path, nodes: int = 3, host: str = "127.0.0.1",
                 client_ports: list[int] | None = None, tick_time_ms: int = 2000, heap_mb: int = 256) -> None:
        if nodes < 3 or nodes % 2 == 0:
            raise ValueError(f"An ensemble has an odd number of nodes, at least 3 (3 or 5), not {nodes}")
        if client_ports is not None and len(client_ports) != nodes:
            raise ValueError(f"client_ports names {len(client_ports)} ports for {nodes} nodes")
        self.data_dir = Path(data_dir).resolve()
        ports = _free_ports(nodes * 3)
        clients = client_ports or ports[:nodes]
        self.quorum = tuple(QuorumServer(myid, host, ports[nodes + 2 * i], ports[nodes + 2 * i + 1])
                            for i, myid in enumerate(range(1, nodes + 1)))
        #: the nodes, in ``myid`` order (``servers[0]`` is ``myid`` 1)
        self.servers = [ZooKeeperServer(data_dir=self.data_dir / f"node-{server.myid}", client_port=clients[i],
                                        host=host, tick_time_ms=tick_time_ms, heap_mb=heap_mb,
                                        myid=server.myid, quorum=self.quorum)
                        for i, server in enumerate(self.quorum)]

    @property
    def connect_string(self) -> str:
        """Every node's ``host:port``, comma-separated: a ``zookeeper.connect`` (add a chroot after the last)."""
        return ",".join(server.connect_string for server in self.servers)

    def node(self, myid: int) -> ZooKeeperServer:
        """The node whose server id is ``myid`` (1 to ``nodes``). Raises :class:`KeyError` for another id."""
        for server in self.servers:
            if server.myid == myid:
                return server
        raise KeyError(f"no node with myid {myid} in this ensemble of {len(self.servers)}")

    def node_at(self, client_port: int) -> ZooKeeperServer:
        """The node that serves clients on ``client_port``. Raises :class:`KeyError` for another port."""
        for server in self.servers:
            if server.client_port == client_port:
                return server
        raise KeyError(f"no node of this ensemble serves clients on port {client_port}")

    def leader(self) -> ZooKeeperServer | None:
        """The node that leads the ensemble now (``srvr`` says ``Mode: leader``), or None without a quorum."""
        for server in self.servers:
            if server.mode() == "leader":
                return server
        return None

    def start(self, *, timeout_s: float = 60.0) -> None:
        """Launch every node, then wait until each serves (they elect a leader once a majority runs).

        ``timeout_s`` (seconds) bounds the whole start. Raises :class:`ZooKeeperStartError` (naming the
        node and the tail of its log) when a node cannot start or does not serve in time; every node is
        stopped first.
        """
        deadline = time.monotonic() + timeout_s
        try:
            for server in self.servers:
                server.launch()
            for server in self.servers:
                server.wait_until_serving(timeout_s=max(deadline - time.monotonic(), 0.0))
        except BaseException:
            self.stop()
            raise

    def stop(self, *, timeout_s: float = 10.0) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``timeout_s`` seconds each); data stays under ``data_dir``."""
        for server in reversed(self.servers):
            server.stop(timeout_s=timeout_s)

    def __enter__(self) -> "ZooKeeperEnsemble":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble({self.connect_string}, data_dir={str(self.data_dir)!r})"
