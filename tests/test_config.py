"""lakelog.config: topic configs with Kafka's names, and broker settings from flags, env, file, defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakelog.config import TOPIC_CONFIG_BROKER_SYNONYMS, TOPIC_ONLY_CONFIGS, BrokerSettings, TopicConfig, read_properties, settings_from_properties
from lakelog.errors import ConfigError, LakelogError
from lakelog.replication.topic_configs import DEFAULT_CONFIG, STATIC_BROKER_CONFIG, config_entries


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No LAKELOG_* variable of the calling shell leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("LAKELOG_"):
            monkeypatch.delenv(name)


# -- TopicConfig --------------------------------------------------------------------------------

def test_topic_config_defaults_are_kafkas():
    config = TopicConfig.parse({})
    assert config == TopicConfig.parse(None) == TopicConfig()
    assert config.to_kafka() == {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "max.message.bytes": "1048588",
        "message.timestamp.type": "CreateTime",
        "min.insync.replicas": "1",
        "retention.bytes": "-1",
        "retention.ms": "604800000",
        "delete.retention.ms": "86400000",
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": "9223372036854775807",
        "min.cleanable.dirty.ratio": "0.5",
        "unclean.leader.election.enable": "false",
        "segment.bytes": "1073741824",
        "segment.ms": "604800000",
        "flush.messages": "9223372036854775807",
        "flush.ms": "9223372036854775807",
        "lake.commit.interval.ms": "1000",
        "lake.commit.bytes": "67108864",
        "lake.tail.max.bytes": "1073741824",
        "lake.vacuum.retention.ms": "60000",
        "confluent.key.schema.validation": "false",
        "confluent.value.schema.validation": "false",
        "key.schema.subject": "",
        "value.schema.subject": "",
        "errors.tolerance": "none",
        "errors.deadletterqueue.topic.name": "",
    }
    assert config.timestamp_type_id == 0
    assert config.value_subject("orders") is None and config.key_subject("orders") is None
    assert config.deletes and not config.compacts


def test_schema_subjects_follow_the_topic_name_strategy_unless_named():
    assert TopicConfig.parse({"confluent.value.schema.validation": "true"}).value_subject("orders") == "orders-value"
    assert TopicConfig.parse({"confluent.key.schema.validation": "true"}).key_subject("orders") == "orders-key"
    named = TopicConfig.parse({"value.schema.subject": "order-v", "confluent.value.schema.validation": "true"})
    assert named.value_subject("orders") == "order-v" and named.key_subject("orders") is None
    with pytest.raises(ConfigError, match="errors.tolerance"):
        TopicConfig.parse({"errors.tolerance": "some"})


@pytest.mark.parametrize("value", ["compact,delete", "delete,compact", " delete , compact", ["compact", "delete"]])
def test_cleanup_policy_takes_both_policies_in_any_order(value):
    config = TopicConfig.parse({"cleanup.policy": value})
    assert config.cleanup_policy == "compact,delete"
    assert config.compacts and config.deletes
    assert config.to_kafka()["cleanup.policy"] == "compact,delete"


def test_cleanup_policy_refuses_an_unknown_policy():
    with pytest.raises(ConfigError, match="cleanup.policy"):
        TopicConfig.parse({"cleanup.policy": "compact,shred"})


def test_topic_config_parses_kafka_named_strings():
    config = TopicConfig.parse({
        "cleanup.policy": " compact ",
        "compression.type": "zstd",
        "max.message.bytes": "1000",
        "message.timestamp.type": "LogAppendTime",
        "min.insync.replicas": "2",
        "retention.bytes": "1073741824",
        "retention.ms": "-1",
        "unclean.leader.election.enable": "true",
    })
    assert config.cleanup_policy == "compact"
    assert config.compression_type == "zstd"
    assert config.max_message_bytes == 1000
    assert config.message_timestamp_type == "LogAppendTime" and config.timestamp_type_id == 1
    assert config.min_insync_replicas == 2
    assert config.retention_bytes == 1073741824
    assert config.retention_ms == -1
    assert config.unclean_leader_election_enable is True
    # round trip through Kafka's names
    assert TopicConfig.parse(config.to_kafka()) == config
    assert config.to_kafka()["unclean.leader.election.enable"] == "true"


def test_topic_config_over_defaults():
    config = TopicConfig.parse({"retention.ms": "100"}, defaults={"retention.ms": "5", "max.message.bytes": "2000"})
    assert config.retention_ms == 100  # the topic's own value wins
    assert config.max_message_bytes == 2000
    assert config.compression_type == "producer"


def test_topic_config_is_immutable():
    config = TopicConfig()
    with pytest.raises(Exception):
        config.retention_ms = 5  # type: ignore[misc]


def test_unknown_topic_config_key_names_it_and_lists_the_known_ones():
    with pytest.raises(ConfigError) as e:
        TopicConfig.parse({"retention.msx": "1"})
    err = e.value
    assert isinstance(err, LakelogError)
    assert err.http_status == 400 and err.error_code == 40003
    assert "unknown config 'retention.msx'" in err.message
    for known in ("retention.ms", "cleanup.policy", "max.message.bytes"):
        assert known in err.message


@pytest.mark.parametrize("key, value", [
    ("cleanup.policy", "bogus"),
    ("compression.type", "brotli"),
    ("max.message.bytes", "0"),
    ("max.message.bytes", "lots"),
    ("retention.ms", "-2"),
    ("message.timestamp.type", "createtime"),
    ("min.insync.replicas", "0"),
])
def test_invalid_topic_config_values_name_the_key_and_the_value(key, value):
    with pytest.raises(ConfigError) as e:
        TopicConfig.parse({key: value})
    assert f"'{key}'" in e.value.message
    assert repr(value) in e.value.message


# -- BrokerSettings -----------------------------------------------------------------------------

def test_broker_defaults():
    s = BrokerSettings.load()
    assert s.broker_id == 0
    assert s.port == 8082
    assert s.host == "127.0.0.1"
    assert s.log_dirs == Path("data/logs")
    assert s.zookeeper_connect == "127.0.0.1:2181"
    assert s.message_max_bytes == 1048588
    assert s.socket_request_max_bytes == 104857600
    assert s.fetch_max_wait_ms == 500
    assert s.num_partitions == 1 and s.default_replication_factor == 1
    assert s.advertised_url == "http://127.0.0.1:8082"


def test_broker_topic_config_defaults_are_those_that_differ_from_the_topics_own():
    assert BrokerSettings.load().topic_config_defaults() == {}  # Kafka's values on both sides
    s = BrokerSettings.load(log_retention_ms=3600000, message_max_bytes=2000, log_retention_bytes=-1)
    assert s.topic_config_defaults() == {"retention.ms": "3600000", "max.message.bytes": "2000"}
    config = TopicConfig.parse({"max.message.bytes": "100"}, defaults=s.topic_config_defaults())
    assert (config.retention_ms, config.max_message_bytes, config.retention_bytes) == (3600000, 100, -1)
    assert BrokerSettings.load(log_retention_bytes=10**9).topic_config_defaults() == {"retention.bytes": "1000000000"}


def test_read_properties_parses_java_properties(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\n! also a comment\n\nbroker.id=3\n  log.dirs = /data/logs  \nzookeeper.connect: zk:2181/lakelog\n"
                    "url=http://x:1/a=b\n")
    assert read_properties(path) == {"broker.id": "3", "log.dirs": "/data/logs", "zookeeper.connect": "zk:2181/lakelog",
                                     "url": "http://x:1/a=b"}
    # Java properties also separate key and value by whitespace; a key alone has an empty value
    spaced = tmp_path / "spaced.properties"
    spaced.write_text("broker.id 3\nflag\n")
    assert read_properties(spaced) == {"broker.id": "3", "flag": ""}
    with pytest.raises(ConfigError, match="Cannot read config file") as e:
        read_properties(tmp_path / "missing.properties")
    assert "missing.properties" in str(e.value)  # the message names the file
    assert read_properties(tmp_path / "missing.properties", missing_ok=True) == {}


def test_settings_precedence_flags_over_env_over_file_over_defaults(tmp_path, monkeypatch):
    props = tmp_path / "server.properties"
    props.write_text("broker.id=1\nport=9001\nlog.dirs=/from/file\nzookeeper.connect=file:2181\nlinger.ms=7\n")

    # file over defaults
    s = BrokerSettings.load(config_file=props)
    assert (s.broker_id, s.port, s.log_dirs, s.zookeeper_connect, s.linger_ms) == (1, 9001, Path("/from/file"), "file:2181", 7.0)
    assert s.fetch_max_wait_ms == 500  # untouched: the default

    # env over file
    monkeypatch.setenv("LAKELOG_PORT", "9002")
    monkeypatch.setenv("LAKELOG_LOG_DIRS", "/from/env")
    monkeypatch.setenv("LAKELOG_FETCH_MAX_WAIT_MS", "250")
    s = BrokerSettings.load(config_file=props)
    assert (s.broker_id, s.port, s.log_dirs, s.fetch_max_wait_ms) == (1, 9002, Path("/from/env"), 250)
    assert s.zookeeper_connect == "file:2181"

    # flags over env; a flag given as None (not passed on the command line) does not count
    s = BrokerSettings.load(config_file=props, port=9003, log_dirs=None, broker_id=None, zookeeper_connect="flag:2181")
    assert (s.broker_id, s.port, s.log_dirs, s.zookeeper_connect, s.fetch_max_wait_ms) == (
        1, 9003, Path("/from/env"), "flag:2181", 250)

    # env over defaults without a file
    s = BrokerSettings.load()
    assert (s.port, s.log_dirs, s.broker_id) == (9002, Path("/from/env"), 0)
    # what neither env nor a file sets keeps its default; what env sets wins over the default
    assert (s.zookeeper_connect, s.linger_ms, s.fetch_max_wait_ms) == ("127.0.0.1:2181", 0.0, 250)


def test_settings_values_are_typed():
    s = BrokerSettings.load(port="9005", linger_ms="1.5", log_dirs="x/y")
    assert s.port == 9005 and s.linger_ms == 1.5 and s.log_dirs == Path("x/y")


def test_invalid_settings_name_the_key(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="'port'.*70000"):
        BrokerSettings.load(port=70000)
    monkeypatch.setenv("LAKELOG_PORT", "not-a-port")
    with pytest.raises(ConfigError, match="'port'.*not-a-port"):
        BrokerSettings.load()
    monkeypatch.delenv("LAKELOG_PORT")
    props = tmp_path / "server.properties"
    props.write_text("bogus.key=1\n")
    with pytest.raises(ConfigError) as e:
        BrokerSettings.load(config_file=props)
    assert "unknown config" in e.value.message and "bogus" in e.value.message
    with pytest.raises(ConfigError, match="Cannot read config file"):
        BrokerSettings.load(config_file=tmp_path / "nope.properties")


def test_unrelated_lakelog_env_vars_are_ignored(monkeypatch):
    # e.g. LAKELOG_BOOTSTRAP_SERVER is the CLI's, not the broker's
    monkeypatch.setenv("LAKELOG_BOOTSTRAP_SERVER", "localhost:9999")
    assert BrokerSettings.load().port == 8082


# -- broker defaults of every topic config (Kafka's STATIC_BROKER_CONFIG synonyms) ---------------

def test_every_topic_config_has_a_broker_setting_with_the_same_default():
    """Kafka's ``ServerTopicConfigSynonyms``: each topic config has a broker default key; lakelog's own
    ``lake.*`` configs keep their name. With the defaults, no broker setting overrides a topic's default."""
    assert sorted([*TOPIC_CONFIG_BROKER_SYNONYMS, *TOPIC_ONLY_CONFIGS]) == sorted(TopicConfig().to_kafka())
    assert TOPIC_CONFIG_BROKER_SYNONYMS["segment.ms"] == "log.roll.ms"
    assert all(TOPIC_CONFIG_BROKER_SYNONYMS[k] == k for k in TOPIC_CONFIG_BROKER_SYNONYMS if k.startswith("lake."))
    for broker_key in TOPIC_CONFIG_BROKER_SYNONYMS.values():
        assert broker_key.replace(".", "_") in BrokerSettings.model_fields, broker_key
    assert BrokerSettings.load().topic_config_defaults() == {}


def test_a_properties_file_env_and_overrides_set_the_default_of_lakelogs_own_topic_configs(tmp_path, monkeypatch):
    props = tmp_path / "broker.properties"
    props.write_text("lake.vacuum.retention.ms=5000\nlog.cleanup.policy=delete, compact\nlog.roll.ms=60000\n"
                     "unclean.leader.election.enable=true\n")
    s = BrokerSettings.load(config_file=props)
    assert s.topic_config_defaults() == {"lake.vacuum.retention.ms": "5000", "cleanup.policy": "compact,delete",
                                         "segment.ms": "60000", "unclean.leader.election.enable": "true"}
    config = TopicConfig.parse({}, defaults=s.topic_config_defaults())
    assert (config.lake_vacuum_retention_ms, config.segment_ms, config.compacts) == (5000, 60000, True)
    monkeypatch.setenv("LAKELOG_LAKE_COMMIT_INTERVAL_MS", "250")
    assert BrokerSettings.load().topic_config_defaults() == {"lake.commit.interval.ms": "250"}
    flags = settings_from_properties({"lake.commit.bytes": "1024", "lake.vacuum.retention.ms": "7"})
    assert BrokerSettings.load(config_file=props, **flags).topic_config_defaults()["lake.vacuum.retention.ms"] == "7"
    assert BrokerSettings.load(**flags).topic_config_defaults()["lake.commit.bytes"] == "1024"


@pytest.mark.parametrize("key, value", [("lake.vacuum.retention.ms", "-1"), ("log.cleanup.policy", "shred"),
                                        ("log.cleaner.min.cleanable.ratio", "2"), ("lake.commit.bytes", "0")])
def test_a_bad_broker_default_of_a_topic_config_is_refused_naming_the_key(tmp_path, key, value):
    props = tmp_path / "broker.properties"
    props.write_text(f"{key}={value}\n")
    with pytest.raises(ConfigError, match=key.replace(".", "_")):
        BrokerSettings.load(config_file=props)


def test_describe_configs_shows_a_lake_config_from_the_broker_as_static_broker_config():
    s = BrokerSettings.load(lake_vacuum_retention_ms=5000)
    entries = {e.name: e for e in config_entries({}, defaults=s.topic_config_defaults())}
    vacuum = entries["lake.vacuum.retention.ms"]
    assert (vacuum.value, vacuum.is_default, vacuum.source) == ("5000", False, STATIC_BROKER_CONFIG)
    assert [(x.name, x.value, x.source) for x in vacuum.synonyms] == [
        ("lake.vacuum.retention.ms", "5000", STATIC_BROKER_CONFIG), ("lake.vacuum.retention.ms", "60000", DEFAULT_CONFIG)]
    assert entries["lake.commit.bytes"].source == DEFAULT_CONFIG


def test_broker_start_takes_any_setting_as_an_override_flag():
    """``lakelog broker start --override key=value`` (kafka-server-start's ``--override``) sets a broker
    setting by its dotted name; a bad value stops the broker naming the key before it connects anywhere."""
    import subprocess
    import sys

    def start(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lakelog.cli", "broker", "start", *args], capture_output=True,
                              text=True, timeout=120)

    out = start("--override", "lake.vacuum.retention.ms=-5")
    assert out.returncode == 1 and "lake_vacuum_retention_ms" in out.stderr.replace("\n", " ")
    out = start("--override", "lake.vacuum.retention.ms")
    assert out.returncode == 1 and "expected key=value" in out.stderr


def test_lake_settings_become_delta_rs_storage_options_and_keep_the_secret_out_of_text(tmp_path):
    config = tmp_path / "broker.properties"
    config.write_text("lake.uri=s3://lake-bucket/cluster-1/\n"
                      "lake.storage.endpoint=http://127.0.0.1:9000\n"
                      "lake.storage.region=eu-west-1\n"
                      "lake.storage.access.key.id=AKIDEXAMPLE\n"
                      "lake.storage.secret.access.key=wJalrXUtnFEMI-secret\n"
                      "lake.storage.path.style.access=true\n"
                      "lake.storage.allow.http=true\n")
    s = BrokerSettings.load(config_file=config)
    assert s.lake_uri == "s3://lake-bucket/cluster-1"
    assert s.lake_storage_options() == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-secret", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true"}
    assert "wJalrXUtnFEMI-secret" not in repr(s) and "wJalrXUtnFEMI-secret" not in str(s.model_dump())
    # without lake.uri: no lake, no storage options (each replica's own table, as before)
    plain = BrokerSettings.load()
    assert plain.lake_uri is None and plain.lake_storage_options() == {}


def test_a_bad_lake_setting_names_the_key_and_never_echoes_the_secret():
    with pytest.raises(ConfigError, match="lake_uri") as raised:
        BrokerSettings.load(lake_uri="https://bucket/prefix")
    assert "s3://bucket" in str(raised.value)
    with pytest.raises(ConfigError, match="lake_storage_secret_access_key") as raised:
        BrokerSettings.load(lake_storage_secret_access_key=["wJalrXUtnFEMI-secret"])
    assert "wJalrXUtnFEMI-secret" not in str(raised.value)
