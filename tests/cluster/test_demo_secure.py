"""``lakelog demo --secure``: the demo end to end (real ZooKeeper, an HTTPS broker with basic authentication and
the authorizer, a local Spark pipeline) with every client step as user ``flights-app`` and only its ACLs."""

from __future__ import annotations

import os
import re

import pytest

from lakelog.processes import DEATH_SIGNAL_SUPPORTED
from tests.cluster import test_process_lifecycle as lifecycle
from tests.cluster.test_process_lifecycle import assert_nothing_left

#: ``lakelog`` commands in child processes, SIGKILLed by pid at the test's end (the lifecycle tests' fixture)
run = lifecycle.run

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="needs Linux (/proc, PR_SET_PDEATHSIG)"),
]

RECORDS = 5000


def test_demo_secure_runs_every_client_step_as_the_demo_user_over_tls(tmp_path, run):
    data_dir = tmp_path / "demo"
    demo = run("demo", "demo", "--secure", "--data-dir", data_dir, "--records", RECORDS,
               env={"COLUMNS": "400"})  # rich wraps at the terminal width: one printed line per line
    code = demo.wait(timeout_s=480)
    out = demo.log_file.read_text(errors="replace")
    assert code == 0, out[-6000:]

    assert re.search(r"broker 0 at https://127\.0\.0\.1:\d+", out)
    assert "created topic 'flights' with 6 partitions, replication factor 1 (as the super user)" in out
    assert ("every client step below runs as User:flights-app with only: Write on topic flights, Read on topic "
            "flights, Describe on topic flights, Read on group flight-delays") in out
    assert "User:flights-app fetching __consumer_offsets (no ACL) is refused: HTTP 403 / 40301" in out
    assert f"produced {RECORDS:,} flights" in out and f"fetched {RECORDS:,} records back" in out
    assert f"its table counts {RECORDS:,} flights (exactly the produced count)" in out
    assert f"SELECT count(*) FROM flights -> {RECORDS:,}" in out
    # a schema'd topic: Avro in the wire format, its SQL on the typed column
    assert "value.schema.subject=flights-value" in out and "typed column value_parsed" in out
    assert "8. stopped the pipeline and Spark, the broker and ZooKeeper" in out

    tls = data_dir / "tls"
    for secret in ("flights-app.password", "admin.password", "ca-key.pem", "broker-0-key.pem"):
        assert (tls / secret).stat().st_mode & 0o777 == 0o600, secret
    password = (tls / "flights-app.password").read_text().strip()
    assert password and password not in out and (tls / "admin.password").read_text().strip() not in out
    assert_nothing_left(data_dir, [int(pid) for pid in re.findall(r"\(pid (\d+)\)", out)])
    assert os.path.exists(data_dir / "flight_delays" / "_delta_log")


def test_demo_secure_refuses_a_bootstrap_server(tmp_path, run):
    demo = run("demo-b", "demo", "--secure", "--bootstrap-server", "127.0.0.1:1", "--data-dir", tmp_path / "d",
               env={"COLUMNS": "400"})
    assert demo.wait(timeout_s=60) == 1
    assert "does not take --bootstrap-server" in demo.log()
