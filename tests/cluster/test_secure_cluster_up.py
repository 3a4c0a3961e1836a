"""``lakelog cluster up --secure``: one command makes a CA, broker and client certificates and a super user
under its data dir and starts brokers with TLS, authentication and ACLs; the connection settings it prints
work for the client and the ``lakelog`` commands."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.processes import DEATH_SIGNAL_SUPPORTED
from lakelog.protocol.errors import RemoteError
from lakelog.runtime.zookeeper_server import free_port
from tests.harness import child_pids
from tests.cluster import test_process_lifecycle as lifecycle
from tests.cluster.test_process_lifecycle import ENV, assert_nothing_left, free_port_pair

#: ``lakelog`` commands in child processes, SIGKILLed by pid at the test's end (the lifecycle tests' fixture)
run = lifecycle.run

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="needs Linux (/proc, PR_SET_PDEATHSIG)"),
]


def printed_settings(command, timeout_s: float = 120.0) -> dict[str, str]:
    """The ``export NAME=value`` lines ``cluster up --secure`` prints once its brokers serve."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert command.running(), command.log()
        exports = dict(re.findall(r"^export (LAKELOG_\w+)=(.*)$", command.log(), re.M))
        if "LAKELOG_PASSWORD" in exports:
            return exports
        time.sleep(0.3)
    raise AssertionError(f"no connection settings printed within {timeout_s} s:\n{command.log()}")


def test_cluster_up_secure(tmp_path, run, topic_name):
    data_dir = tmp_path / "cluster"
    port, zk_port = free_port_pair(), free_port()
    cluster = run("cluster", "cluster", "up", "--secure", "--brokers", 2, "--data-dir", data_dir, "--port", port,
                  "--zookeeper-port", zk_port, "--log-level", "warning", env=ENV)
    exports = printed_settings(cluster)
    assert exports["LAKELOG_BOOTSTRAP_SERVER"] == f"https://127.0.0.1:{port},https://127.0.0.1:{port + 1}"
    password_file = re.fullmatch(r'"\$\(cat (.+)\)"', exports["LAKELOG_PASSWORD"]).group(1)
    password = open(password_file).read().strip()
    assert f"password (shown once): {password}" in cluster.log()
    assert os.stat(password_file).st_mode & 0o777 == 0o600
    assert (data_dir / "tls" / "ca-key.pem").stat().st_mode & 0o777 == 0o600

    bootstrap, cafile = exports["LAKELOG_BOOTSTRAP_SERVER"], exports["LAKELOG_SSL_CAFILE"]
    with LakelogClient(bootstrap, ssl_cafile=cafile) as anonymous:  # TLS verified, but no credentials
        with pytest.raises(RemoteError) as e:
            anonymous.admin.list_topics()
        assert e.value.http_status == 401
    with LakelogClient(bootstrap, ssl_cafile=cafile, auth=("admin", password)) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=2)
        admin.produce_arrow(topic_name, 0, pa.table({"value": pa.array([b"secure"])}))  # acks=all over TLS
        assert admin.fetch_arrow(topic_name, 0, 0).column("value").to_pylist() == [b"secure"]

    env = {**os.environ, **{k: v for k, v in exports.items() if k != "LAKELOG_PASSWORD"},
           "LAKELOG_PASSWORD": password}
    listed = subprocess.run([sys.executable, "-m", "lakelog.cli", "topics", "list"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0 and topic_name in listed.stdout, listed.stderr
    # or with the super user's certificate (mtls), the printed --command-config file alone
    properties = re.search(r"lakelog --command-config (\S+) topics list", cluster.log()).group(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    listed = subprocess.run([sys.executable, "-m", "lakelog.cli", "--command-config", properties, "topics", "list",
                             "-b", bootstrap], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and topic_name in listed.stdout, listed.stderr

    children = child_pids(cluster.pid)
    assert len(children) == 3  # ZooKeeper and the brokers
    cluster.send(signal.SIGTERM)
    assert cluster.wait(90) == 0, cluster.log()
    assert_nothing_left(data_dir, children)
