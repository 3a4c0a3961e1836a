"""The Kafka listener's protocol edges, with raw frames on a socket: an unsupported ApiVersions version,
an API or version not served, an oversized frame, a batch with a bad CRC, Produce v2 (KAFKA-18659)."""

from __future__ import annotations

import socket
import struct

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from lakelog.kafka.versions import SERVED
from tests.harness import read_partition, wait_for


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=60)


def _read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed response (without the prefix); b"" when the broker closed the connection."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        assert chunk, "connection closed inside a response"
        body += chunk
    return body


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _batch(values: list[bytes]) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**20)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000, None, value, [])
    return builder.build()


def _produce_frame(topic: str, records: bytes, *, version: int = 9, acks: int = -1) -> bytes:
    request = ProduceRequest(version=version, transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(version=version, name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(version=version, index=0, records=records)])])
    request.with_header(correlation_id=5, client_id="edge-test")
    return bytes(request.encode(header=True, framed=True))


def test_unsupported_api_versions_version_answers_v0_with_error_35(kafka_broker):
    """ApiVersions v9: answered in v0 with UNSUPPORTED_VERSION and the ApiVersions range (KIP-511); the
    connection stays open and a v3 request then gets the served APIs."""
    _, bootstrap = kafka_broker
    with _connect(bootstrap) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 18, 9, 42, -1))
        answer = ApiVersionsResponse.decode(_read_frame(sock), version=0, header=True)
        assert answer.header.correlation_id == 42
        assert answer.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == [(18, 0, SERVED[18].max)]
        request = ApiVersionsRequest(version=3, client_software_name="edge", client_software_version="1")
        request.with_header(correlation_id=43, client_id="edge-test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        answer = ApiVersionsResponse.decode(_read_frame(sock), version=3, header=True)
        assert answer.error_code == 0
        assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == {
            key: (r.advertised_min, r.max) for key, r in SERVED.items()}


def test_unknown_api_closes_the_connection_with_a_warning(kafka_broker):
    """An API the listener does not serve (key 57, UpdateFeatures) closes the connection with a WARN line
    naming the client, API key and version; the broker goes on serving others."""
    broker, bootstrap = kafka_broker
    with _connect(bootstrap) as sock:
        sock.sendall(struct.pack(">ihhih", 14, 57, 0, 1, 4) + b"edge")
        assert _closed(sock)
    wait_for(lambda: "(client 'edge') closed: API key 57 version 0 is not served" in broker.log_file.read_text(),
             what="the WARN line of an API not served")
    test_unsupported_api_versions_version_answers_v0_with_error_35(kafka_broker)


def test_oversized_frame_closes_before_the_body(kafka_broker):
    """A size prefix above socket.request.max.bytes (100 MiB) closes the connection without the body
    being sent or read."""
    _, bootstrap = kafka_broker
    with _connect(bootstrap) as sock:
        sock.sendall(struct.pack(">i", 104857600 + 1))
        assert _closed(sock)
    with _connect(bootstrap) as sock:
        sock.sendall(struct.pack(">i", -5))
        assert _closed(sock)


def test_bad_crc_answers_corrupt_message_and_writes_nothing(kafka_broker, kafka_topic):
    """A batch whose CRC-32C does not match answers CORRUPT_MESSAGE (2); nothing is written; a good batch
    on the same connection is then written at offset 0."""
    broker, bootstrap = kafka_broker
    bad = _batch([b"a", b"b"])
    bad[-1] ^= 0xFF  # a record byte changed after the CRC was computed
    with _connect(bootstrap) as sock:
        sock.sendall(_produce_frame(kafka_topic, bytes(bad)))
        answer = ProduceResponse.decode(_read_frame(sock), version=9, header=True)
        (partition,) = answer.responses[0].partition_responses
        assert partition.error_code == 2 and partition.base_offset == -1
        assert read_partition(broker.url, kafka_topic, 0) == []
        sock.sendall(_produce_frame(kafka_topic, bytes(_batch([b"good"]))))
        answer = ProduceResponse.decode(_read_frame(sock), version=9, header=True)
        (partition,) = answer.responses[0].partition_responses
        assert (partition.error_code, partition.base_offset) == (0, 0)


def test_batch_claiming_more_records_than_it_holds_is_invalid(kafka_broker, kafka_topic):
    """A batch whose record count says 3 but holds 2 (CRC recomputed) answers INVALID_RECORD (87) or
    CORRUPT_MESSAGE (2); nothing is written."""
    from crc32c import crc32c

    broker, bootstrap = kafka_broker
    batch = _batch([b"a", b"b"])
    struct.pack_into(">i", batch, 57, 3)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with _connect(bootstrap) as sock:
        sock.sendall(_produce_frame(kafka_topic, bytes(batch)))
        answer = ProduceResponse.decode(_read_frame(sock), version=9, header=True)
        (partition,) = answer.responses[0].partition_responses
        assert partition.error_code in (2, 87)
    assert read_partition(broker.url, kafka_topic, 0) == []


def test_produce_v2_is_advertised_but_refused(kafka_broker, kafka_topic):
    """KAFKA-18659: Produce is advertised from v0 (librdkafka < 2.11.1 checks v0 before compressing) but a
    v0-2 request closes the connection, as Kafka 4 does."""
    broker, bootstrap = kafka_broker
    assert SERVED[0].advertised_min == 0 and SERVED[0].accepted_min == 3
    with _connect(bootstrap) as sock:
        sock.sendall(_produce_frame(kafka_topic, bytes(_batch([b"x"])), version=2))
        assert _closed(sock)
    assert read_partition(broker.url, kafka_topic, 0) == []


def test_acks_0_gets_no_answer_and_a_failure_closes_the_connection(kafka_broker, kafka_topic):
    """acks=0: a good produce gets no response (the next request's answer comes first); a failed one (an
    unknown topic) closes the connection, so the producer refreshes its metadata (Kafka's behaviour)."""
    broker, bootstrap = kafka_broker
    with _connect(bootstrap) as sock:
        sock.sendall(_produce_frame(kafka_topic, bytes(_batch([b"fire-and-forget"])), acks=0))
        request = ApiVersionsRequest(version=3, client_software_name="edge", client_software_version="1")
        request.with_header(correlation_id=77, client_id="edge-test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        assert ApiVersionsResponse.decode(_read_frame(sock), version=3, header=True).header.correlation_id == 77
        sock.sendall(_produce_frame(f"{kafka_topic}-missing", bytes(_batch([b"lost"])), acks=0))
        assert _closed(sock)
    wait_for(lambda: [r["offset"] for r in read_partition(broker.url, kafka_topic, 0)] == [0],
             what="the acks=0 record written")


def test_a_malformed_request_closes_only_its_connection(kafka_broker):
    """A Metadata v4 request claiming 2**31-1 topics in a few bytes (and one cut short) closes its connection
    with a WARN line; the broker serves the next connection."""
    broker, bootstrap = kafka_broker
    header = struct.pack(">hhih", 3, 4, 9, 4) + b"evil"
    for body in (struct.pack(">i", 2**31 - 1) + b"\x00\x01a", struct.pack(">i", 1)):
        with _connect(bootstrap) as sock:
            sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            assert _closed(sock)
    wait_for(lambda: "API key 3 version 4 does not decode" in broker.log_file.read_text(),
             what="the WARN line of a malformed request")
    test_unsupported_api_versions_version_answers_v0_with_error_35(kafka_broker)


def test_an_idle_connection_is_closed(broker_factory, zk_client):
    """connections.max.idle.ms: a connection that sends nothing is closed."""
    from tests.kafka.conftest import KAFKA_LISTENER_ENV, kafka_bootstrap

    broker_factory(extra_env={**KAFKA_LISTENER_ENV, "LAKELOG_CONNECTIONS_MAX_IDLE_MS": "300"})
    with _connect(kafka_bootstrap(zk_client, 0)) as sock:
        assert _closed(sock)


def test_a_retried_idempotent_batch_is_written_once(kafka_broker, kafka_topic):
    """An idempotent producer's batch sent twice (a retry after a lost answer: same producer id, epoch and
    base sequence) is answered with the first write's offset and written once; the next sequence goes on."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    broker, bootstrap = kafka_broker
    with _connect(bootstrap) as sock:
        request = InitProducerIdRequest(version=4, transactional_id=None, transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1)
        request.with_header(correlation_id=3, client_id="edge-test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        ids = InitProducerIdResponse.decode(_read_frame(sock), version=4, header=True)
        assert ids.error_code == 0 and ids.producer_id >= 0

        def batch(sequence: int, values: list[bytes]) -> bytes:
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                                producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                                                base_sequence=sequence, batch_size=2**20)
            for i, value in enumerate(values):
                builder.append(i, 1_700_000_000_000, None, value, [])
            return bytes(builder.build())

        answers = []
        for records in (batch(0, [b"a", b"b"]), batch(0, [b"a", b"b"]), batch(2, [b"c"])):
            sock.sendall(_produce_frame(kafka_topic, records))
            (partition,) = ProduceResponse.decode(_read_frame(sock), version=9, header=True).responses[0].partition_responses
            answers.append((partition.error_code, partition.base_offset))
    assert answers == [(0, 0), (0, 0), (0, 2)]
    assert [r["offset"] for r in read_partition(broker.url, kafka_topic, 0)] == [0, 1, 2]


def test_a_decompression_bomb_is_refused(kafka_broker, kafka_topic):
    """A zstd batch of a few kB whose records inflate past socket.request.max.bytes (100 MiB) answers
    CORRUPT_MESSAGE: decompression stops at the bound, nothing is written."""
    import cramjam
    from crc32c import crc32c

    broker, bootstrap = kafka_broker
    head = bytearray(_batch([b"x"])[:61])
    payload = bytes(cramjam.zstd.compress(bytes(101 * 1024 * 1024)))
    assert len(payload) < 1024 * 1024
    head[22] = (head[22] & 0xF8) | 4  # zstd
    struct.pack_into(">i", head, 8, 49 + len(payload))
    bomb = head + payload
    struct.pack_into(">I", bomb, 17, crc32c(bytes(bomb[21:])))
    with _connect(bootstrap) as sock:
        sock.sendall(_produce_frame(kafka_topic, bytes(bomb)))
        (partition,) = ProduceResponse.decode(_read_frame(sock), version=9, header=True).responses[0].partition_responses
        assert partition.error_code == 2
        assert "socket.request.max.bytes" in partition.error_message
    assert read_partition(broker.url, kafka_topic, 0) == []
