"""The APIs and versions the Kafka listener serves: the one table ApiVersions advertises and the docs
print (``docs/kafka.md``, checked by ``tests/kafka/test_versions.py``).

Each row: ``api key -> (advertised min, accepted min, max)``. Only what is implemented is advertised.
Produce is advertised from 0 but accepted from 3 (Kafka 4's KAFKA-18659: librdkafka before 2.11.1 tests
"Produce v0 supported" before compressing, and Kafka 4.0 removed v0-2); a request of a version between
the advertised and the accepted minimum closes the connection with a WARN line, as Kafka does. The maxima
stop before topic ids name topics in requests (Produce v13, Fetch v13): lakelog answers topic ids in
Metadata but does not look topics up by id yet.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["API_NAMES", "SERVED", "ApiRange", "accepts", "served_rows"]


class ApiRange(NamedTuple):
    """Versions of one API: ``advertised_min`` (what ApiVersions says), ``accepted_min`` (the lowest a
    request may use), ``max``."""

    advertised_min: int
    accepted_min: int
    max: int


#: Kafka's API names by key (clients/src/main/resources/common/message/*.json)
API_NAMES: dict[int, str] = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
                             9: "OffsetFetch", 10: "FindCoordinator", 17: "SaslHandshake", 18: "ApiVersions",
                             22: "InitProducerId", 36: "SaslAuthenticate"}
API_NAMES.update({11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups",
                  16: "ListGroups", 42: "DeleteGroups", 47: "OffsetDelete"})
API_NAMES.update({19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 29: "DescribeAcls",
                  30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs",
                  37: "CreatePartitions", 44: "IncrementalAlterConfigs", 60: "DescribeCluster"})

#: api key -> :class:`ApiRange`
SERVED: dict[int, ApiRange] = {
    0: ApiRange(0, 3, 11),    # Produce: advertise 0 for librdkafka < 2.11.1 (KAFKA-18659), accept >= 3
    1: ApiRange(4, 4, 12),    # Fetch: Kafka 4's floor; v13+ names topics by id
    2: ApiRange(1, 1, 6),     # ListOffsets: earliest (-2), latest (-1), by timestamp; v7+ adds max timestamp (-3)
    3: ApiRange(0, 0, 12),    # Metadata
    8: ApiRange(2, 2, 8),     # OffsetCommit: Kafka 4's floor; v9+ carries KIP-848 member epochs
    9: ApiRange(1, 1, 7),     # OffsetFetch: one group per request (v8+ batches groups)
    10: ApiRange(0, 0, 4),    # FindCoordinator: groups and transactional ids (v4+ batches keys)
    17: ApiRange(0, 0, 1),    # SaslHandshake: v0 then raw SASL tokens (KIP-43), v1 then SaslAuthenticate
    18: ApiRange(0, 0, 4),    # ApiVersions (any higher version is answered in v0 with UNSUPPORTED_VERSION)
    22: ApiRange(0, 0, 5),    # InitProducerId: idempotent producers (Java's and librdkafka's default)
    19: ApiRange(2, 2, 7),    # CreateTopics: Kafka 4's floor; validate_only, configs (no replica assignments)
    20: ApiRange(1, 1, 6),    # DeleteTopics: Kafka 4's floor; v6 by name or topic id
    37: ApiRange(0, 0, 3),    # CreatePartitions (no replica assignments)
    32: ApiRange(1, 1, 4),    # DescribeConfigs: Kafka 4's floor; TOPIC and BROKER resources
    44: ApiRange(0, 0, 1),    # IncrementalAlterConfigs: topics, SET and DELETE
    33: ApiRange(0, 0, 2),    # AlterConfigs: topics
    60: ApiRange(0, 0, 1),    # DescribeCluster (v2 lists fenced brokers)
    21: ApiRange(0, 0, 2),    # DeleteRecords
    29: ApiRange(1, 1, 3),    # DescribeAcls: Kafka 4's floor
    30: ApiRange(1, 1, 3),    # CreateAcls: Kafka 4's floor
    31: ApiRange(1, 1, 3),    # DeleteAcls: Kafka 4's floor
    36: ApiRange(0, 0, 2),    # SaslAuthenticate: v1+ session_lifetime_ms (KIP-368)
}
SERVED.update({
    11: ApiRange(0, 0, 9),    # JoinGroup: v4+ two-step join (MEMBER_ID_REQUIRED)
    12: ApiRange(0, 0, 4),    # Heartbeat
    13: ApiRange(0, 0, 5),    # LeaveGroup: v3+ batches members
    14: ApiRange(0, 0, 5),    # SyncGroup: v5+ names the protocol type and name
    15: ApiRange(0, 0, 5),    # DescribeGroups
    16: ApiRange(0, 0, 5),    # ListGroups: v4+ filters by state
    42: ApiRange(0, 0, 2),    # DeleteGroups
    47: ApiRange(0, 0, 0),    # OffsetDelete
})
API_NAMES.update({24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
                  65: "DescribeTransactions", 66: "ListTransactions"})
SERVED.update({
    24: ApiRange(0, 0, 3),    # AddPartitionsToTxn: the client form (v4+ is KIP-890's broker-to-broker form)
    25: ApiRange(0, 0, 4),    # AddOffsetsToTxn
    26: ApiRange(0, 0, 4),    # EndTxn: v5 is KIP-890's transaction version 2 (an epoch bump per transaction)
    28: ApiRange(0, 0, 4),    # TxnOffsetCommit: v3+ group generation and member id (KIP-447)
    65: ApiRange(0, 0, 0),    # DescribeTransactions
    66: ApiRange(0, 0, 2),    # ListTransactions: v1 duration filter, v2 transactional id pattern
})


def accepts(api_key: int, version: int) -> bool:
    """Whether a request of ``api_key`` at ``version`` is served (within its accepted range)."""
    served = SERVED.get(api_key)
    return served is not None and served.accepted_min <= version <= served.max


def served_rows() -> list[tuple[str, int, str]]:
    """``(name, key, versions)`` per served API in key order, ``versions`` as ``"3-11 (0-11 advertised)"``
    or ``"0-12"``: what the docs' table prints."""
    rows = []
    for key, r in sorted(SERVED.items()):
        versions = f"{r.accepted_min}-{r.max}"
        if r.advertised_min != r.accepted_min:
            versions += f" ({r.advertised_min}-{r.max} advertised)"
        rows.append((API_NAMES[key], key, versions))
    return rows
