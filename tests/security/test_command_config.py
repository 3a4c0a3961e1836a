"""The CLI's --command-config FILE (Kafka tools' flag) against a real broker with authentication.methods=basic:
the file's sasl.username / sasl.password reach every command, and it wins over the environment's credentials."""

from __future__ import annotations

import os
import subprocess
import sys

from lakelog.client import LakelogClient

BROKER_PASSWORD = "inter-broker-s3cret"
SECURE = {"LAKELOG_AUTHENTICATION_METHODS": "basic", "LAKELOG_INTER_BROKER_PASSWORD": BROKER_PASSWORD}


def lakelog(*args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, timeout=60,
                          env={**clean, "COLUMNS": "400", **(env or {})}, input=input)


def test_command_config_credentials_reach_every_command(broker_factory, tmp_path, topic_name):
    broker = broker_factory(extra_env=SECURE)
    b = ["--bootstrap-server", broker.url]
    with LakelogClient(broker.url, auth=("broker", BROKER_PASSWORD)) as admin:
        admin.security.upsert_user("alice", "alice-pw")
    props = tmp_path / "alice.properties"
    props.write_text("# Kafka-style client settings\nsasl.username=alice\nsasl.password=alice-pw\n")
    cc = ["--command-config", str(props)]

    created = lakelog(*cc, "topics", "create", topic_name, "--partitions", "1", *b)
    assert f"Created topic {topic_name}" in created.stdout.decode(), created.stderr.decode()
    produced = lakelog(*cc, "produce", topic_name, *b, input=b"one\ntwo\n")
    assert "2 records produced" in produced.stderr.decode(), produced.stderr.decode()
    consumed = lakelog(*cc, "consume", topic_name, "--from-beginning", *b)
    assert consumed.stdout.decode().splitlines() == ["one", "two"], consumed.stderr.decode()
    # the file wins over the environment's (wrong) credentials; LAKELOG_COMMAND_CONFIG names it too
    wrong = {"LAKELOG_USERNAME": "alice", "LAKELOG_PASSWORD": "Xyzzy-9"}
    assert topic_name in lakelog(*cc, "topics", "list", *b, env=wrong).stdout.decode()
    assert topic_name in lakelog("topics", "list", *b, env={"LAKELOG_COMMAND_CONFIG": str(props)}).stdout.decode()
    refused = lakelog("topics", "list", *b, env=wrong)
    assert refused.returncode == 1 and "unknown user or wrong password for 'alice'" in refused.stderr.decode()
    assert "Xyzzy-9" not in broker.log_tail(200) and "alice-pw" not in broker.log_tail(200)


def test_command_config_files_that_cannot_work_are_refused(tmp_path):
    cases = {
        "sasl.username=alice\n": "set both sasl.username and sasl.password",
        "sasl.username=a\nsasl.password=b\nsasl.oauthbearer.token=t\n": "not both",
        "sasl.jaas.config=x\n": "unknown key(s) sasl.jaas.config",
        "ssl.cafile=/nonexistent/ca.pem\n": "ssl.cafile /nonexistent/ca.pem: not a readable PEM CA certificate",
    }
    for i, (text, message) in enumerate(cases.items()):
        props = tmp_path / f"c{i}.properties"
        props.write_text(text)
        out = lakelog("--command-config", str(props), "topics", "list", "-b", "127.0.0.1:1")
        assert out.returncode == 1 and message in " ".join(out.stderr.decode().split()), (text, out.stderr.decode())
    out = lakelog("--command-config", str(tmp_path / "missing.properties"), "topics", "list")
    assert out.returncode != 0 and "missing.properties" in out.stderr.decode()
    both = lakelog("topics", "list", "-b", "127.0.0.1:1", env={"LAKELOG_TOKEN": "t", "LAKELOG_USERNAME": "a",
                                                               "LAKELOG_PASSWORD": "b"})
    assert both.returncode == 1 and "not both" in both.stderr.decode()
