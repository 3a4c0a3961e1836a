"""Typed settings for brokers, clients and topics.

Settings come, highest precedence first, from: explicit arguments (CLI flags), environment variables
``LAKELOG_<NAME>`` (``LAKELOG_LOG_DIRS``), a Kafka-style ``.properties`` file (``--config FILE``, keys
with Kafka's dotted names: ``log.dirs``, ``zookeeper.connect``), then the defaults below. A dotted key
``a.b.c`` sets the field ``a_b_c``.

Topic configs keep Kafka's dotted names everywhere users see them (``retention.ms``,
``max.message.bytes``); :class:`TopicConfig` validates them.
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, InitSettingsSource, SettingsConfigDict

from lakelog.errors import ConfigError



def default_file(name: str) -> Path:
    """The path of one of lakelog's built-in default files (package data of :mod:`lakelog.defaults`).

    ``name`` is a file name such as ``"zookeeper.properties"`` or ``"spark-defaults.conf"``. The files ship
    inside the package, so this works from a wheel as from a source checkout. Raises :class:`ConfigError`
    when the installed package has no such file or is not unpacked on a file system (a zip import): the
    JVMs lakelog starts read these files by path.
    """
    resource = files("lakelog.defaults").joinpath(name)
    path = Path(str(resource))
    if not isinstance(resource, Path) or not path.is_file():
        raise ConfigError(f"lakelog's default file {name!r} is missing from the installed package ({resource}); "
                          "reinstall lakelog")
    return path


_PROPERTY_LINE = re.compile(r"^(\S+?)\s*(?:[=:]|\s)\s*(.*)$")


def read_properties(path: str | Path, *, missing_ok: bool = False) -> dict[str, str]:
    """Parse a Java ``.properties`` file: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments.

    Returns a dict of the raw string values, keys as written (a key alone has the value ``""``).
    Raises :class:`ConfigError` if the file cannot be read (a missing one gives ``{}`` when
    ``missing_ok``).
    """
    path = Path(path)
    if missing_ok and not path.exists():
        return {}
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"Cannot read config file {path}: {e.strerror}") from e
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = _PROPERTY_LINE.match(line)
        key, value = (m.group(1), m.group(2).strip()) if m else (line, "")
        values[key] = value
    return values


def _dotted_to_field(values: dict[str, Any]) -> dict[str, Any]:
    return {k.replace(".", "_").replace("-", "_"): v for k, v in values.items()}


def settings_from_properties(values: dict[str, str]) -> dict[str, str]:
    """Broker settings named as in a properties file (``{"lake.vacuum.retention.ms": "5000"}``, Kafka's
    aliases of :data:`KAFKA_SETTING_ALIASES` accepted) as :meth:`BrokerSettings.load` keyword arguments
    (``{"lake_vacuum_retention_ms": "5000"}``); keys and values stripped. An unknown key is refused by
    :meth:`BrokerSettings.load`."""
    return _dotted_to_field(_kafka_aliases({k.strip(): v.strip() for k, v in values.items()}))


#: The SASL mechanisms the Kafka listener serves (``sasl.enabled.mechanisms`` picks among them).
SASL_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: Kafka's names of settings lakelog names otherwise, accepted in a properties file: Kafka name -> lakelog name.
KAFKA_SETTING_ALIASES: dict[str, str] = {
    "sasl.oauthbearer.jwks.endpoint.url": "oauth.jwks.url",
    "sasl.oauthbearer.expected.issuer": "oauth.expected.issuer",
    "sasl.oauthbearer.expected.audience": "oauth.expected.audience",
    "sasl.oauthbearer.clock.skew.seconds": "oauth.clock.skew.s",
    "sasl.oauthbearer.sub.claim.name": "oauth.principal.claim",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "oauth.jwks.refresh.ms",
}


def _kafka_aliases(values: dict[str, str]) -> dict[str, str]:
    """Kafka-named keys of :data:`KAFKA_SETTING_ALIASES` renamed to lakelog's (lakelog's own name wins)."""
    out = {KAFKA_SETTING_ALIASES.get(k, k): v for k, v in values.items() if k in KAFKA_SETTING_ALIASES}
    out.update({k: v for k, v in values.items() if k not in KAFKA_SETTING_ALIASES})
    return out


INT64_MAX = 2**63 - 1  # Kafka's Long.MAX_VALUE, the default of its "never" configs

#: The broker setting that gives each topic config its default (Kafka's STATIC_BROKER_CONFIG synonyms, from
#: Kafka's ``ServerTopicConfigSynonyms``): topic key -> broker key. Kafka's own broker name where Kafka has
#: one (``retention.ms`` <- ``log.retention.ms``, ``segment.ms`` <- ``log.roll.ms``); lakelog's own
#: ``lake.*`` topic configs keep their name as the broker key (``lake.vacuum.retention.ms`` in a broker's
#: properties file is the default of every topic's ``lake.vacuum.retention.ms``), as Kafka does for
#: ``min.insync.replicas``, ``compression.type`` and ``unclean.leader.election.enable``.
TOPIC_CONFIG_BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "lake.commit.interval.ms": "lake.commit.interval.ms",
    "lake.commit.bytes": "lake.commit.bytes",
    "lake.tail.max.bytes": "lake.tail.max.bytes",
    "lake.vacuum.retention.ms": "lake.vacuum.retention.ms",
}

#: Topic configs with no broker default (a subject or a dead-letter topic names one topic's own things).
TOPIC_ONLY_CONFIGS: frozenset[str] = frozenset({
    "confluent.key.schema.validation", "confluent.value.schema.validation", "key.schema.subject",
    "value.schema.subject", "errors.tolerance", "errors.deadletterqueue.topic.name"})

CleanupPolicy = Literal["delete", "compact", "compact,delete"]
CompressionType = Literal["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
TimestampType = Literal["CreateTime", "LogAppendTime"]


def _cleanup_policy(v: Any) -> Any:
    """``cleanup.policy`` normalised: a list or a comma-separated string, either order, spaces -> sorted
    ``compact,delete``; anything else unchanged (the field's type then refuses it)."""
    if isinstance(v, (list, tuple)):
        v = ",".join(str(x) for x in v)
    if isinstance(v, str):
        parts = sorted({x.strip() for x in v.split(",") if x.strip()})
        return ",".join(parts) if parts else v.strip()
    return v


class BrokerSettings(BaseSettings):
    """Settings of one broker process (Kafka's ``server.properties`` counterpart).

    Load with :meth:`load`; the constructor alone reads only the environment.
    """

    model_config = SettingsConfigDict(env_prefix="LAKELOG_", extra="forbid")

    broker_id: int = Field(0, ge=0, description="broker.id: this broker's id, unique in the cluster (its znode /lakelog/brokers/ids/{id}, the replica lists of topics). Default: 0.")
    host: str = Field("127.0.0.1", description="Interface the gateway listens on and advertises. Default: 127.0.0.1.")
    port: int = Field(8082, ge=0, le=65535, description="HTTP port of the gateway (REST Proxy's 8082). Default: 8082.")
    rack: str | None = Field(None, description="broker.rack: the rack (or zone) of this broker, shown by GET /v3/clusters/{c}/brokers. Default: none.")
    log_dirs: Path = Field(Path("data/logs"), description="Where the partition Delta tables live. Default: data/logs.")
    zookeeper_connect: str = Field("127.0.0.1:2181", description="zookeeper.connect: host:port[,host:port][/chroot]. Default: 127.0.0.1:2181.")
    zookeeper_session_timeout_ms: int = Field(18000, gt=0, description="zookeeper.session.timeout.ms: a broker whose ZooKeeper session is silent this long is taken for dead (its ephemeral znodes go, the controller elects new leaders). Default: 18000 (Kafka's).")
    linger_ms: float = Field(0.0, ge=0, description="How long a partition's group commit waits for more produce requests after the first one (requests that arrive during an append share the next one anyway). Default: 0.")
    batch_size: int = Field(16 * 1024 * 1024, gt=0, description="Bytes after which a group commit is written without waiting for linger.ms. Default: 16 MiB.")
    message_max_bytes: int = Field(1048588, gt=0, description="message.max.bytes: max.message.bytes of topics that set none. Default: 1048588 (Kafka's).")
    socket_request_max_bytes: int = Field(104857600, gt=0, description="socket.request.max.bytes: largest HTTP body accepted, and largest Kafka request frame (a larger size prefix closes the connection before the body is read). Default: 100 MiB (Kafka's).")
    queued_max_request_bytes: int = Field(512 * 1024 * 1024, ge=-1, description="queued.max.request.bytes: bytes of produce request bodies in flight on this broker (read, decoded, being appended) above which a new produce answers 429 with Retry-After; one request is always admitted when none is in flight; -1 = unbounded (Kafka's default). Default: 512 MiB.")
    log_tail_cache_max_bytes: int = Field(32 * 1024 * 1024, ge=0, description="Bytes of the newest records per partition kept in memory for tail fetches. Default: 32 MiB.")
    log_segment_files_max: int = Field(64, ge=2, description="Data files per partition table after which the broker merges the oldest small ones into one (each delta-rs commit costs time per file). Default: 64.")
    log_retention_ms: int = Field(604800000, ge=-1, description="log.retention.ms: retention.ms of topics that set none; -1 = keep forever. Default: 604800000 (7 days, Kafka's).")
    log_retention_bytes: int = Field(-1, ge=-1, description="log.retention.bytes: retention.bytes (per partition) of topics that set none; -1 = no limit. Default: -1.")
    log_retention_check_interval_ms: int = Field(300000, gt=0, description="log.retention.check.interval.ms: how often each partition log checks retention, compaction (log.cleaner) and VACUUM. Default: 300000 (Kafka's).")
    # -- defaults of topic configs (TOPIC_CONFIG_BROKER_SYNONYMS; a topic that sets the config overrides it) --
    log_cleanup_policy: CleanupPolicy = Field("delete", description="log.cleanup.policy: cleanup.policy of topics that set none (delete, compact or compact,delete). Default: delete.")
    compression_type: CompressionType = Field("producer", description="compression.type: compression.type of topics that set none (the Parquet codec of their data files). Default: producer.")
    log_message_timestamp_type: TimestampType = Field("CreateTime", description="log.message.timestamp.type: message.timestamp.type of topics that set none. Default: CreateTime.")
    min_insync_replicas: int = Field(1, gt=0, description="min.insync.replicas: min.insync.replicas of topics that set none. Default: 1.")
    log_cleaner_delete_retention_ms: int = Field(86400000, ge=0, description="log.cleaner.delete.retention.ms: delete.retention.ms of topics that set none. Default: 86400000 (1 day).")
    log_cleaner_min_compaction_lag_ms: int = Field(0, ge=0, description="log.cleaner.min.compaction.lag.ms: min.compaction.lag.ms of topics that set none. Default: 0.")
    log_cleaner_max_compaction_lag_ms: int = Field(INT64_MAX, ge=1, description="log.cleaner.max.compaction.lag.ms: max.compaction.lag.ms of topics that set none. Default: never (Long.MAX_VALUE).")
    log_cleaner_min_cleanable_ratio: float = Field(0.5, ge=0.0, le=1.0, description="log.cleaner.min.cleanable.ratio: min.cleanable.dirty.ratio of topics that set none. Default: 0.5.")
    unclean_leader_election_enable: bool = Field(False, description="unclean.leader.election.enable: unclean.leader.election.enable of topics that set none. Default: false.")
    log_segment_bytes: int = Field(1073741824, ge=14, description="log.segment.bytes: segment.bytes of topics that set none. Default: 1073741824 (1 GiB).")
    log_roll_ms: int = Field(604800000, ge=1, description="log.roll.ms: segment.ms of topics that set none. Default: 604800000 (7 days).")
    log_flush_interval_messages: int = Field(INT64_MAX, ge=1, description="log.flush.interval.messages: flush.messages of topics that set none. Default: never (Long.MAX_VALUE).")
    log_flush_interval_ms: int = Field(INT64_MAX, ge=0, description="log.flush.interval.ms: flush.ms of topics that set none. Default: never (Long.MAX_VALUE).")
    lake_commit_interval_ms: int = Field(1000, ge=0, description="lake.commit.interval.ms: lake.commit.interval.ms of topics that set none (lakelog's own topic configs keep their name as the broker key). Default: 1000.")
    lake_commit_bytes: int = Field(64 * 1024 * 1024, ge=1, description="lake.commit.bytes: lake.commit.bytes of topics that set none. Default: 67108864 (64 MiB).")
    lake_tail_max_bytes: int = Field(1024 * 1024 * 1024, ge=1, description="lake.tail.max.bytes: lake.tail.max.bytes of topics that set none (a shared lake only). Default: 1073741824 (1 GiB).")
    lake_vacuum_retention_ms: int = Field(60000, ge=0, description="lake.vacuum.retention.ms: lake.vacuum.retention.ms of topics that set none. Default: 60000.")
    # -- the lake on an object store (lakelog.log_tables.lake_storage) --
    lake_uri: str | None = Field(None, description="lake.uri: where every partition's Delta table lives for all its replicas, one table per partition written by its leader (s3://bucket/prefix on an S3-compatible object store); the segment tail stays under log.dirs. The table of a partition is {lake.uri}/{topic}-{topic id}/{partition}, so a deleted and re-created topic starts a new table. Set it alike on every broker of a cluster. Default: none (each replica keeps its own table under log.dirs).")
    lake_storage_endpoint: str | None = Field(None, description="lake.storage.endpoint: URL of the S3 API (e.g. http://127.0.0.1:9000 for a store on premises); delta-rs's AWS_ENDPOINT_URL. Default: none (AWS S3 of lake.storage.region).")
    lake_storage_region: str | None = Field(None, description="lake.storage.region: the object store's region; delta-rs's AWS_REGION. Default: none (the AWS SDK's own lookup).")
    lake_storage_access_key_id: str | None = Field(None, description="lake.storage.access.key.id: the access key id of the object store's credentials; delta-rs's AWS_ACCESS_KEY_ID. Default: none (the AWS SDK's own lookup: environment, profile, instance role).")
    lake_storage_secret_access_key: SecretStr | None = Field(None, description="lake.storage.secret.access.key: the secret of that access key; delta-rs's AWS_SECRET_ACCESS_KEY (never logged). Default: none.")
    lake_storage_path_style_access: bool = Field(False, description="lake.storage.path.style.access: address buckets as {endpoint}/{bucket} rather than {bucket}.{endpoint} (most stores on premises need it); delta-rs's AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false. Default: false.")
    lake_storage_allow_http: bool = Field(False, description="lake.storage.allow.http: allow an http:// lake.storage.endpoint (plain HTTP, for a local store); delta-rs's AWS_ALLOW_HTTP. Default: false.")
    fetch_max_wait_ms: int = Field(500, ge=0, description="Default long-poll wait of a fetch (fetch.max.wait.ms). Default: 500.")
    num_partitions: int = Field(1, gt=0, description="num.partitions: partitions of a topic created without a count. Default: 1.")
    default_replication_factor: int = Field(1, gt=0, description="default.replication.factor: replicas of a topic created without a replication factor. Default: 1.")
    consumer_instance_timeout_ms: int = Field(300000, gt=0, description="consumer.instance.timeout.ms (REST Proxy): an HTTP consumer instance without requests for this long is deleted and its group rebalances. Default: 300000.")
    partition_assignment_strategy: Literal["range", "roundrobin", "sticky"] = Field("range", description="partition.assignment.strategy of HTTP consumer instances that name none (Kafka consumer config): range, roundrobin or sticky. Default: range.")
    group_min_session_timeout_ms: int = Field(6000, gt=0, description="group.min.session.timeout.ms: the smallest session.timeout.ms a Kafka client's group member may ask for (a smaller one answers INVALID_SESSION_TIMEOUT). Default: 6000 (Kafka's).")
    group_max_session_timeout_ms: int = Field(1800000, gt=0, description="group.max.session.timeout.ms: the largest session.timeout.ms a Kafka client's group member may ask for. Default: 1800000 (Kafka's).")
    group_initial_rebalance_delay_ms: int = Field(3000, ge=0, description="group.initial.rebalance.delay.ms: how long the first rebalance of an empty Kafka-protocol group waits for more members to join (each join extends it, up to the members' rebalance timeout), so consumers started together get one assignment. Default: 3000 (Kafka's).")
    replica_lag_time_max_ms: int = Field(30000, gt=0, description="replica.lag.time.max.ms: a follower that has not caught up to the leader's log end offset for this long leaves the ISR. Default: 30000.")
    replica_fetch_wait_max_ms: int = Field(500, ge=0, description="replica.fetch.wait.max.ms: long-poll of a follower's fetch. Default: 500.")
    replica_fetch_max_bytes: int = Field(16 * 1024 * 1024, gt=0, description="replica.fetch.max.bytes: soft limit on the bytes of one follower fetch. Default: 16 MiB.")
    replica_fetch_backoff_ms: int = Field(100, ge=0, description="replica.fetch.backoff.ms: pause after a failed follower fetch. Default: 100.")
    request_timeout_ms: int = Field(30000, gt=0, description="request.timeout.ms: how long an acks=all produce waits for the ISR. Default: 30000.")
    producer_id_expiration_ms: int = Field(86400000, gt=0, description="producer.id.expiration.ms: a partition forgets an idempotent producer that produced nothing to it for this long (its requests answer 409 / 40917 until then). Default: 86400000 (1 day, Kafka's).")
    producer_id_expiration_check_interval_ms: int = Field(600000, gt=0, description="producer.id.expiration.check.interval.ms: how often expired producers are removed. Default: 600000 (Kafka's).")
    producer_snapshot_interval_ms: int = Field(60000, gt=0, description="How often each partition replica snapshots its producer state beside its log (also at a clean shutdown; Kafka snapshots at each segment roll), so a restart reads only the log after the snapshot. Default: 60000.")
    offsets_topic_num_partitions: int = Field(12, gt=0, le=1000, description="offsets.topic.num.partitions: partitions of the internal topic __consumer_offsets, created on the first offset commit (a group's coordinator leads partition abs(hashCode(group)) % this). Do not change it once the topic exists. Default: 12.")
    offsets_topic_replication_factor: int = Field(3, gt=0, description="offsets.topic.replication.factor: replicas of __consumer_offsets; with fewer live brokers when it is created, it gets as many replicas as there are brokers (logged). Default: 3 (Kafka's).")
    transaction_state_log_num_partitions: int = Field(12, gt=0, le=1000, description="transaction.state.log.num.partitions: partitions of the internal topic __transaction_state, created when the first transactional producer initializes (a transactional id's coordinator leads partition abs(hashCode(transactional.id)) % this). Do not change it once the topic exists. Default: 12 (Kafka's is 50; here each partition is a Delta table with its own flusher on every replica, as for offsets.topic.num.partitions).")
    transaction_state_log_replication_factor: int = Field(3, gt=0, description="transaction.state.log.replication.factor: replicas of __transaction_state; with fewer live brokers when it is created, it gets as many replicas as there are brokers (logged). Default: 3 (Kafka's).")
    transaction_state_log_min_isr: int = Field(2, gt=0, description="transaction.state.log.min.isr: min.insync.replicas of __transaction_state, at most its replication factor - 1 (at least 1), so it stays writable with one replica down. Default: 2 (Kafka's).")
    transaction_max_timeout_ms: int = Field(900000, gt=0, description="transaction.max.timeout.ms: the largest transaction.timeout.ms a transactional producer may ask for (a larger one answers 400 / 40011). Default: 900000 (15 minutes, Kafka's).")
    transactional_id_expiration_ms: int = Field(604800000, gt=0, description="transactional.id.expiration.ms: a transactional id with no transaction open and no state change for this long is forgotten by its coordinator (a tombstone in __transaction_state). Default: 604800000 (7 days, Kafka's).")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(10000, gt=0, description="transaction.abort.timed.out.transaction.cleanup.interval.ms: how often a transaction coordinator aborts the transactions open longer than their timeout and forgets expired transactional ids. Default: 10000 (Kafka's).")
    auto_leader_rebalance_enable: bool = Field(True, description="auto.leader.rebalance.enable: the controller moves leadership back to the preferred replica once it is in sync. Default: true.")
    leader_imbalance_check_interval_seconds: float = Field(300, gt=0, description="leader.imbalance.check.interval.seconds: how often the controller checks for preferred leaders. Default: 300.")
    controlled_shutdown_enable: bool = Field(True, description="controlled.shutdown.enable: on SIGTERM move this broker's leaderships to other in-sync replicas before exiting. Default: true.")
    metrics_enabled: bool = Field(True, description="metrics.enabled: record the hot path's metrics (per-route request latency, per-topic traffic counters, append, Delta commit and group-commit histograms) for GET /metrics. false leaves only the gauges read at scrape time (partitions, offsets, lag). Default: true.")
    # -- slow clients (HTTP connections of the gateway; lakelog.ingest_api.http_guard) --
    connections_max_idle_ms: int = Field(30000, gt=0, description="connections.max.idle.ms: a connection with no request in progress (after accept or after an answer) is closed after this long. Kafka's 600000 suits its clients' long-lived connections; 30000 is REST Proxy's HTTP idle timeout. Default: 30000.")
    request_header_timeout_ms: int = Field(20000, gt=0, description="request.header.timeout.ms: from a request's first byte, its headers must arrive within this long, else 408 / 40802 and the connection is closed. Default: 20000.")
    request_body_timeout_ms: int = Field(30000, gt=0, description="request.body.timeout.ms: from the end of its headers, a request's body must arrive within this long plus one second per request.body.min.bytes.per.sec bytes received, else 408 / 40802 and the connection is closed. Default: 30000.")
    request_body_min_bytes_per_sec: int = Field(1024, gt=0, description="request.body.min.bytes.per.sec: each this many body bytes received extend the body deadline by one second (a slower trickle times out). Default: 1024.")
    max_connections: int = Field(4096, gt=0, description="max.connections: open HTTP connections of the broker; a connection beyond it is answered 503 / 50305 (retriable, Retry-After) and closed. The Kafka listeners count their own connections against the same limit (all listeners together, as Kafka's broker-wide max.connections): one beyond it is closed at once with a WARN line. Keep it below the process's open-file limit. Default: 4096.")
    # -- security (lakelog.security) --
    authentication_methods: str = Field("none", description="authentication.methods: none (every request is User:ANONYMOUS), or a comma-separated list (as Kafka's sasl.enabled.mechanisms) of basic (HTTP Basic checked against the user's SCRAM-SHA-512 credential in ZooKeeper; lakelog users add) oauthbearer (Authorization: Bearer <JWT> checked against oauth.jwks.url, oauth.expected.issuer, oauth.expected.audience; principal User:{oauth.principal.claim}) and mtls (the principal is User:{subject} of the client's TLS certificate after ssl.principal.mapping.rules; needs ssl.client.auth=requested or required); the scheme of a request's Authorization header picks the method, and a request without one is the certificate's principal with mtls. Brokers authenticate to each other with HTTP Basic as inter.broker.username: with oauthbearer alone, Basic stays accepted for that user only. /health and /ready never ask for credentials. Default: none.")
    oauth_jwks_url: str | None = Field(None, description="oauth.jwks.url (Kafka: sasl.oauthbearer.jwks.endpoint.url, accepted as an alias in a properties file): the JWKS (RFC 7517) whose keys sign the bearer tokens: an http(s):// URL (fetched, cached for oauth.jwks.refresh.ms, fetched again at once for an unknown kid, at most every 30 s) or a file path / file:// URL (read again when it changes). Required with oauthbearer. Default: none.")
    oauth_expected_issuer: str | None = Field(None, description="oauth.expected.issuer (Kafka: sasl.oauthbearer.expected.issuer): the iss claim every token must have. Default: none (not checked).")
    oauth_expected_audience: str | None = Field(None, description="oauth.expected.audience (Kafka: sasl.oauthbearer.expected.audience): comma-separated audiences; a token's aud must hold one of them. Default: none (not checked).")
    oauth_clock_skew_s: float = Field(30, ge=0, description="oauth.clock.skew.s (Kafka: sasl.oauthbearer.clock.skew.seconds): leeway in seconds of the exp, nbf and iat checks. Default: 30 (Kafka's).")
    oauth_principal_claim: str = Field("sub", min_length=1, description="oauth.principal.claim (Kafka: sasl.oauthbearer.sub.claim.name): the claim whose string value is the principal's name (User:{claim}). Default: sub.")
    oauth_jwks_refresh_ms: int = Field(3600000, gt=0, description="oauth.jwks.refresh.ms (Kafka: sasl.oauthbearer.jwks.endpoint.refresh.ms): how long a JWKS fetched from a URL is used before it is fetched again. Default: 3600000 (Kafka's).")
    inter_broker_username: str = Field("broker", min_length=1, description="inter.broker.username: the user brokers authenticate as to each other with HTTP Basic whenever authentication.methods is not none (replica fetch, forwarding, coordinators); a broker creates it at start when it does not exist. Default: broker.")
    inter_broker_password: SecretStr | None = Field(None, description="inter.broker.password: that user's password; required unless authentication.methods=none (never logged). Default: none.")
    authorizer_enabled: bool = Field(False, description="authorizer.enabled: check Kafka's ACLs (lakelog acls) on every route, what Kafka checks for the matching API (produce Write, fetch Read, metadata Describe, ...; the internal replica and coordinator routes ClusterAction on the cluster). The brokers' principal User:{inter.broker.username} is always a super user. Default: false.")
    super_users: str = Field("", description="super.users: principals allowed everything, separated by ';' (User:admin;User:ops). Default: none.")
    allow_everyone_if_no_acl_found: bool = Field(False, description="allow.everyone.if.no.acl.found: allow a request on a resource no ACL applies to. Default: false (Kafka's).")
    quota_window_num: int = Field(11, ge=2, description="quota.window.num: samples of the rates client quotas are measured over (lakelog quotas). Default: 11 (Kafka's).")
    quota_window_size_seconds: float = Field(1.0, gt=0, description="quota.window.size.seconds: seconds each sample covers. Default: 1 (Kafka's).")
    # -- TLS (lakelog.security.tls; PEM files) --
    listeners: str = Field("", description="listeners: the Kafka protocol listeners, comma-separated NAME://host:port (PLAINTEXT://127.0.0.1:9092; an empty host binds every interface, port 0 a free port), each NAME's security protocol in listener.security.protocol.map (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL). lakelog broker start, lakelog up and the demo open PLAINTEXT://127.0.0.1:9092 unless told otherwise. Default: none (no Kafka listener).")
    advertised_listeners: str = Field("", description="advertised.listeners: the NAME://host:port each listener registers in ZooKeeper, what Metadata answers clients (a listener missing here advertises its own host, or this broker's host when it binds every interface, and its bound port). Default: the listeners.")
    auto_create_topics_enable: bool = Field(True, description="auto.create.topics.enable: a Kafka client's Metadata request for a topic that does not exist creates it (num.partitions, default.replication.factor) when the client allows auto-creation and the principal may Create, as Kafka's. HTTP requests never create topics. Default: true (Kafka's).")
    listener_security_protocol_map: str = Field("PLAINTEXT:PLAINTEXT", description="listener.security.protocol.map: NAME:PROTOCOL pairs, comma-separated, PROTOCOL one of PLAINTEXT, SSL (TLS with ssl.certfile; a client certificate's principal after ssl.principal.mapping.rules, User:ANONYMOUS without one), SASL_PLAINTEXT and SASL_SSL (SASL authentication of sasl.enabled.mechanisms first). A listener named as a protocol needs no entry. Default: PLAINTEXT:PLAINTEXT.")
    sasl_server_max_receive_size: int = Field(524288, gt=0, description="sasl.server.max.receive.size: the largest request a SASL listener reads before the client authenticated (ApiVersions, SaslHandshake, SaslAuthenticate); a larger size prefix closes the connection before the body is read, so an unauthenticated client cannot make the broker buffer socket.request.max.bytes. Default: 524288 (Kafka's).")
    sasl_enabled_mechanisms: str = Field("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", description="sasl.enabled.mechanisms: the SASL mechanisms of the SASL_PLAINTEXT and SASL_SSL Kafka listeners, comma-separated: PLAIN (user and password checked against the user's SCRAM-SHA-512 credential, as HTTP Basic), SCRAM-SHA-256 and SCRAM-SHA-512 (against the user's credential of that mechanism; lakelog users add writes both), OAUTHBEARER (a JWT checked as an HTTP Bearer token: oauth.jwks.url, oauth.expected.issuer, oauth.expected.audience). Use PLAIN over SASL_SSL only: the password crosses the wire. Default: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 (Kafka's is GSSAPI, which lakelog does not serve).")
    ssl_certfile: Path | None = Field(None, description="ssl.certfile: PEM certificate (chain) of this broker: with it the gateway serves HTTPS only and advertises https://host:port, and the broker presents it as its client certificate to the other brokers. Default: none (plain HTTP).")
    ssl_keyfile: Path | None = Field(None, description="ssl.keyfile: PEM private key of ssl.certfile (unencrypted). Default: none (the key is in ssl.certfile).")
    ssl_cafile: Path | None = Field(None, description="ssl.cafile: PEM CA certificate(s) the broker verifies the other brokers' certificates and its clients' certificates (ssl.client.auth) against; required with ssl.client.auth other than none. Default: none (the other brokers are verified against the system's trusted CAs).")
    ssl_client_auth: Literal["none", "requested", "required"] = Field("none", description="ssl.client.auth: none (no client certificate asked), requested (asked; a client without one may connect) or required (the TLS handshake fails without a valid one), as Kafka's. Default: none.")
    ssl_principal_mapping_rules: str = Field("DEFAULT", description="ssl.principal.mapping.rules: Kafka's rules turning a client certificate's distinguished name (RFC 2253, CN=alice,OU=eng) into a principal name, e.g. RULE:^CN=([^,]+).*$/$1/L,DEFAULT. Default: DEFAULT (the whole distinguished name).")

    @field_validator("log_cleanup_policy", mode="before")
    @classmethod
    def _log_cleanup_policy(cls, v: Any) -> Any:
        return _cleanup_policy(v)

    @field_validator("lake_uri")
    @classmethod
    def _lake_uri(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip().rstrip("/")
        m = re.fullmatch(r"(s3|s3a)://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^?#]*)?", v)
        if m is None:
            raise ValueError("expected s3://bucket or s3://bucket/prefix (a bucket name of 3-63 lower-case "
                             "letters, digits, dots and hyphens)")
        return v

    def lake_storage_options(self) -> dict[str, str]:
        """The ``lake.storage.*`` settings as delta-rs storage options (``AWS_ENDPOINT_URL``, ``AWS_REGION``,
        ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_VIRTUAL_HOSTED_STYLE_REQUEST``,
        ``AWS_ALLOW_HTTP``; delta-rs's S3 storage options, the names of the Rust ``object_store`` crate):
        only those set. The secret is in the answer: never log it. delta-rs 1.x commits to S3 with a
        conditional put (``If-None-Match: *``), so no locking provider and no unsafe rename is needed."""
        options: dict[str, str] = {}
        for key, value in (("AWS_ENDPOINT_URL", self.lake_storage_endpoint), ("AWS_REGION", self.lake_storage_region),
                           ("AWS_ACCESS_KEY_ID", self.lake_storage_access_key_id)):
            if value:
                options[key] = value
        if self.lake_storage_secret_access_key is not None:
            options["AWS_SECRET_ACCESS_KEY"] = self.lake_storage_secret_access_key.get_secret_value()
        if self.lake_storage_path_style_access:
            options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if self.lake_storage_allow_http:
            options["AWS_ALLOW_HTTP"] = "true"
        return options

    @field_validator("authentication_methods")
    @classmethod
    def _methods(cls, v: str) -> str:
        names = {m.strip().lower() for m in v.split(",") if m.strip()}
        if not names or names - {"none", "basic", "oauthbearer", "mtls"} or ("none" in names and len(names) > 1):
            raise ValueError("expected none, or a comma-separated list of basic, oauthbearer and mtls "
                             "(e.g. basic,oauthbearer)")
        return ",".join(sorted(names))

    @field_validator("sasl_enabled_mechanisms")
    @classmethod
    def _sasl_mechanisms(cls, v: str) -> str:
        names = [m.strip().upper() for m in v.split(",") if m.strip()]
        if not names or set(names) - set(SASL_MECHANISMS):
            raise ValueError(f"expected a comma-separated list of {', '.join(SASL_MECHANISMS)}")
        return ",".join(dict.fromkeys(names))

    @property
    def sasl_mechanism_list(self) -> tuple[str, ...]:
        """``sasl.enabled.mechanisms`` in its order: ``("PLAIN", "SCRAM-SHA-256", ...)``."""
        return tuple(self.sasl_enabled_mechanisms.split(","))

    @property
    def authentication_method_set(self) -> frozenset[str]:
        """``authentication.methods`` as a set: ``{"none"}``, ``{"basic", "oauthbearer"}``, ..."""
        return frozenset(self.authentication_methods.split(","))

    @property
    def authenticates(self) -> bool:
        """True unless ``authentication.methods=none``."""
        return self.authentication_methods != "none"

    @property
    def inter_broker_basic(self) -> bool:
        """Whether brokers authenticate to each other with HTTP Basic as inter.broker.username: with basic or
        oauthbearer; with mtls alone their certificates do (they map to inter.broker.username)."""
        return bool(self.authentication_method_set & {"basic", "oauthbearer"})

    @model_validator(mode="after")
    def _inter_broker_password_with_basic(self) -> "BrokerSettings":
        if self.inter_broker_basic and not (self.inter_broker_password and
                                            self.inter_broker_password.get_secret_value()):
            raise ValueError(f"inter.broker.password must be set with authentication.methods={self.authentication_methods}: "
                             "brokers authenticate to each other as inter.broker.username")
        if "mtls" in self.authentication_method_set and (self.ssl_certfile is None or self.ssl_client_auth == "none"):
            raise ValueError("authentication.methods=mtls needs ssl.certfile and ssl.client.auth=requested or required: "
                             "the principal comes from the client's TLS certificate")
        for key, path in (("ssl.certfile", self.ssl_certfile), ("ssl.keyfile", self.ssl_keyfile),
                          ("ssl.cafile", self.ssl_cafile)):
            if path is not None and not path.is_file():
                raise ValueError(f"{key} {path}: no such file (a PEM file)")
        if self.ssl_client_auth != "none" and self.ssl_certfile is None:
            raise ValueError("ssl.client.auth needs ssl.certfile: client certificates are asked in the TLS handshake")
        if self.ssl_client_auth != "none" and self.ssl_cafile is None:
            raise ValueError("ssl.client.auth needs ssl.cafile: the CA the clients' certificates are verified against "
                             "(without it every client certificate, the brokers' own included, is refused)")
        if self.authorizer_enabled and not self.authenticates:
            raise ValueError("authorizer.enabled=true needs authentication.methods=basic, oauthbearer or mtls: without authentication "
                             "every request, the brokers' own included, is User:ANONYMOUS")
        if "oauthbearer" in self.authentication_method_set and not self.oauth_jwks_url:
            raise ValueError("authentication.methods=oauthbearer needs oauth.jwks.url: the JWKS URL or file "
                             "whose keys sign the tokens")
        return self

    @classmethod
    def load(cls, *, config_file: str | Path | None = None, **overrides: Any) -> "BrokerSettings":
        """Build settings from flags (``overrides``, None values ignored), env, a properties file, defaults.

        Raises :class:`ConfigError` naming the bad key when a value is invalid or unknown.
        """
        file_values = _dotted_to_field(_kafka_aliases(read_properties(config_file))) if config_file else {}
        overrides = {k: v for k, v in overrides.items() if v is not None}

        class _Layered(cls):  # type: ignore[misc, valid-type]
            @classmethod
            def settings_customise_sources(cls_, settings_cls, init_settings, env_settings,
                                           dotenv_settings, file_secret_settings):
                return (init_settings, env_settings, InitSettingsSource(settings_cls, file_values))

        try:
            layered = _Layered(**overrides)
        except ValidationError as e:
            raise ConfigError(_explain(e)) from e
        return cls.model_construct(**layered.model_dump())

    def topic_config_defaults(self) -> dict[str, str]:
        """The broker's defaults of topic configs (Kafka's STATIC_BROKER_CONFIG synonyms), Kafka-named: each
        topic config from its broker setting of :data:`TOPIC_CONFIG_BROKER_SYNONYMS` (``retention.ms`` from
        ``log.retention.ms``, ``lake.vacuum.retention.ms`` from ``lake.vacuum.retention.ms``, ...); only
        those that differ from :class:`TopicConfig`'s own defaults. A topic config not set on the topic
        takes this value (``TopicConfig.parse(configs, defaults=...)``), also after it is deleted from the
        topic."""
        own = TopicConfig().to_kafka()
        values = {}
        for topic_key, broker_key in TOPIC_CONFIG_BROKER_SYNONYMS.items():
            value = getattr(self, broker_key.replace(".", "_"))
            values[topic_key] = str(value).lower() if isinstance(value, bool) else str(value)
        return {k: v for k, v in values.items() if v != own[k]}

    @property
    def advertised_url(self) -> str:
        """``http://host:port`` of this broker's gateway (``https://`` with ``ssl.certfile``)."""
        return f"{'https' if self.ssl_certfile else 'http'}://{self.host}:{self.port}"


class TopicConfig(BaseModel):
    """Per-topic configuration with Kafka's names, defaults and meanings (Kafka topic configs doc).

    Construct with :meth:`parse` from ``{"retention.ms": "86400000", ...}``; unknown keys are refused.
    """

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    cleanup_policy: CleanupPolicy = Field(
        "delete", alias="cleanup.policy",
        description="delete (retention.ms and retention.bytes remove the oldest records), compact (the log "
                    "cleaner keeps the latest record per key; records without a key are refused) or both "
                    "(compact,delete; either order and spaces accepted). Default: delete.")
    compression_type: CompressionType = Field(
        "producer", alias="compression.type",
        description="The Parquet codec of the partition's Delta data files; producer = snappy. Default: producer.")
    max_message_bytes: int = Field(
        1048588, gt=0, alias="max.message.bytes",
        description="The largest record a produce may carry (key, value and headers); a larger one answers "
                    "422 / 42225 and nothing is written. Default: the broker's message.max.bytes (1048588, Kafka's).")
    message_timestamp_type: TimestampType = Field(
        "CreateTime", alias="message.timestamp.type",
        description="CreateTime (the producer's timestamp, else the broker's time) or LogAppendTime (the "
                    "broker's time at the append). Default: CreateTime.")
    min_insync_replicas: int = Field(
        1, gt=0, alias="min.insync.replicas",
        description="With acks=all, a produce is refused (503 / 50310) before anything is written while the "
                    "ISR is smaller than this. Default: 1.")
    retention_bytes: int = Field(
        -1, ge=-1, alias="retention.bytes",
        description="Per partition: the oldest Delta data files leave the log while the log without them "
                    "still holds this many bytes (cleanup.policy=delete); -1 = no limit. Default: the "
                    "broker's log.retention.bytes (-1).")
    retention_ms: int = Field(
        604800000, ge=-1, alias="retention.ms",
        description="The oldest Delta data files whose newest record is older than this leave the log "
                    "(cleanup.policy=delete); -1 = keep forever. Default: the broker's log.retention.ms "
                    "(604800000, 7 days).")
    delete_retention_ms: int = Field(
        86400000, ge=0, alias="delete.retention.ms",
        description="Log cleaner (cleanup.policy=compact): how long a tombstone (null value) stays readable "
                    "after it has been through one cleaning, measured from its timestamp. Default: 86400000 (1 day).")
    min_compaction_lag_ms: int = Field(
        0, ge=0, alias="min.compaction.lag.ms",
        description="Log cleaner: how old a record must be before it may be compacted (data files with newer "
                    "records are not cleaned yet). Default: 0.")
    max_compaction_lag_ms: int = Field(
        INT64_MAX, ge=1, alias="max.compaction.lag.ms",
        description="Log cleaner: at most how long a record may stay uncompacted: a dirty file older than this "
                    "starts a cleaning whatever the dirty ratio (KIP-354). Default: never (Long.MAX_VALUE).")
    min_cleanable_dirty_ratio: float = Field(
        0.5, ge=0.0, le=1.0, alias="min.cleanable.dirty.ratio",
        description="Log cleaner: the dirty share (not yet cleaned bytes / all bytes of the cleanable range) "
                    "above which a cleaning starts. Default: 0.5.")
    unclean_leader_election_enable: bool = Field(
        False, alias="unclean.leader.election.enable",
        description="Let the controller elect a replica outside the ISR when no in-sync replica is left "
                    "(acknowledged records may be lost). Default: false.")
    segment_bytes: int = Field(
        1073741824, ge=14, alias="segment.bytes",
        description="The segment tail rolls to a new file at this size (it also rolls at the size of one "
                    "flush commit and after each flush). Default: 1073741824 (1 GiB, Kafka's).")
    segment_ms: int = Field(
        604800000, ge=1, alias="segment.ms",
        description="The segment tail rolls to a new file at this age. Default: 604800000 (7 days, Kafka's).")
    flush_messages: int = Field(
        INT64_MAX, ge=1, alias="flush.messages",
        description="fsync the segment tail after this many records. Default: never (Long.MAX_VALUE, Kafka's: "
                    "the OS decides; replication, not fsync, keeps acknowledged records).")
    flush_ms: int = Field(
        INT64_MAX, ge=0, alias="flush.ms",
        description="fsync the segment tail this long after the last fsync. Default: never (Long.MAX_VALUE, Kafka's).")
    lake_commit_interval_ms: int = Field(
        1000, ge=0, alias="lake.commit.interval.ms",
        description="lakelog's own: how often the segment tail below the high watermark is committed to the "
                    "partition's Delta table (the lake end offset moves); 0 = a synchronous Delta commit per "
                    "append and no segment tail (no transactions then). Default: 1000.")
    lake_commit_bytes: int = Field(
        64 * 1024 * 1024, ge=1, alias="lake.commit.bytes",
        description="lakelog's own: a flush starts before lake.commit.interval.ms once this many bytes wait "
                    "in the tail, and one Delta commit holds at most this many. Default: 67108864 (64 MiB).")
    lake_tail_max_bytes: int = Field(
        1024 * 1024 * 1024, ge=1, alias="lake.tail.max.bytes",
        description="lakelog's own, a shared lake (lake.uri) only: the leader refuses produce (503 / 50331, "
                    "retriable; KAFKA_STORAGE_ERROR on the Kafka listener) while its segment tail holds more than "
                    "this many bytes not yet in the table, as when the object store cannot be reached; producers "
                    "retry until the flusher caught up. Default: 1073741824 (1 GiB).")
    lake_vacuum_retention_ms: int = Field(
        60000, ge=0, alias="lake.vacuum.retention.ms",
        description="lakelog's own: a data file that leaves the Delta table (retention, compaction, merges, "
                    "truncation) is deleted from disk (VACUUM) this long after, so readers of an older table "
                    "version and time travel work inside this window; also the table's "
                    "delta.deletedFileRetentionDuration and delta.logRetentionDuration. Default: 60000 "
                    "(Kafka's file.delete.delay.ms).")

    confluent_key_schema_validation: bool = Field(
        False, alias="confluent.key.schema.validation",
        description="Confluent's name: record keys must be in Confluent's wire format with a schema of the "
                    "key subject (key.schema.subject, else <topic>-key); a key that does not decode is refused "
                    "(or sent to errors.deadletterqueue.topic.name). Default: false.")
    confluent_value_schema_validation: bool = Field(
        False, alias="confluent.value.schema.validation",
        description="Confluent's name: record values must be in Confluent's wire format with a schema of the "
                    "value subject (value.schema.subject, else <topic>-value, the topic-name strategy); a value "
                    "that does not decode is refused (or sent to errors.deadletterqueue.topic.name), and the "
                    "partition tables get a typed value_parsed column. Default: false.")
    key_schema_subject: str = Field(
        "", alias="key.schema.subject",
        description="lakelog's own: the schema registry subject of the topic's keys; set, it turns key "
                    "validation on as confluent.key.schema.validation does. Default: none.")
    value_schema_subject: str = Field(
        "", alias="value.schema.subject",
        description="lakelog's own: the schema registry subject of the topic's values; set, it turns value "
                    "validation and the typed value_parsed column on as confluent.value.schema.validation "
                    "does. Default: none.")
    errors_tolerance: Literal["none", "all"] = Field(
        "none", alias="errors.tolerance",
        description="Kafka Connect's name, for schema validation: none refuses a produce holding a record that "
                    "does not decode against its subject (nothing written); all writes such records to "
                    "errors.deadletterqueue.topic.name instead and the rest to the topic. Default: none.")
    errors_deadletterqueue_topic_name: str = Field(
        "", alias="errors.deadletterqueue.topic.name",
        description="Kafka Connect's name: with errors.tolerance=all, the topic that receives the records "
                    "that do not decode, with the reason in their headers. Default: none.")

    @field_validator("cleanup_policy", mode="before")
    @classmethod
    def _strip(cls, v: Any) -> Any:
        return _cleanup_policy(v)

    @property
    def compacts(self) -> bool:
        """True when ``cleanup.policy`` has ``compact``: the log cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy

    @property
    def deletes(self) -> bool:
        """True when ``cleanup.policy`` has ``delete``: ``retention.ms`` / ``retention.bytes`` remove old records."""
        return "delete" in self.cleanup_policy

    @classmethod
    def parse(cls, configs: dict[str, Any] | None = None, *, defaults: dict[str, Any] | None = None) -> "TopicConfig":
        """Validate Kafka-named topic configs over ``defaults``. Raises :class:`ConfigError`."""
        merged = {**(defaults or {}), **(configs or {})}
        try:
            return cls.model_validate(merged)
        except ValidationError as e:
            raise ConfigError(_explain(e, known=sorted(f.alias for f in cls.model_fields.values()))) from e

    def to_kafka(self) -> dict[str, str]:
        """All configs as Kafka-named strings (``{"retention.ms": "604800000", ...}``)."""
        out = {}
        for name, field in type(self).model_fields.items():
            v = getattr(self, name)
            out[field.alias] = str(v).lower() if isinstance(v, bool) else str(v)
        return out

    def value_subject(self, topic: str) -> str | None:
        """The registry subject a record value of ``topic`` must decode against, or None when values are not
        validated: ``value.schema.subject``, else ``<topic>-value`` (Confluent's TopicNameStrategy) when
        ``confluent.value.schema.validation`` is true."""
        if self.value_schema_subject:
            return self.value_schema_subject
        return f"{topic}-value" if self.confluent_value_schema_validation else None

    def key_subject(self, topic: str) -> str | None:
        """As :meth:`value_subject` for record keys (``key.schema.subject``, else ``<topic>-key``)."""
        if self.key_schema_subject:
            return self.key_schema_subject
        return f"{topic}-key" if self.confluent_key_schema_validation else None

    @property
    def timestamp_type_id(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime (the ``timestampType`` column of Spark's Kafka source)."""
        return 0 if self.message_timestamp_type == "CreateTime" else 1


def _explain(e: ValidationError, known: list[str] | None = None) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "config"
        if err["type"] == "extra_forbidden":
            msg = f"unknown config '{loc}'" + (f" (known: {', '.join(known)})" if known else "")
        elif not err["loc"] or any("password" in str(x) or "secret" in str(x) for x in err["loc"]):
            # a check of the whole settings (its input is every value, secrets included) or of a secret
            msg = f"'{loc}': {err['msg']}"
        else:
            msg = f"'{loc}': {err['msg']} (got {err.get('input')!r})"
        parts.append(msg)
    return "Invalid configuration: " + "; ".join(parts)
