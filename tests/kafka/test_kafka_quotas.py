"""Client quotas on the Kafka listener, as Kafka's broker applies them (KIP-219): a producer over its
``producer_byte_rate`` is served, answered with a throttle time, and its connection is muted for it; a
client id without a quota is not throttled. The quota is set through the same API as for HTTP."""

from __future__ import annotations

import time

from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from lakelog.client import LakelogClient
from tests.harness import wait_for
from tests.kafka.test_protocol_edges import _batch, _connect, _read_frame


def _produce(topic: str, values: list[bytes], *, client_id: str, correlation_id: int) -> bytes:
    request = ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(version=9, name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(version=9, index=0,
                                                                 records=bytes(_batch(values)))])])
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def test_a_producer_over_its_byte_rate_is_answered_with_a_throttle_time_and_muted(kafka_broker, kafka_topic):
    broker, bootstrap = kafka_broker
    with LakelogClient(broker.url) as api:
        api.security.alter_client_quotas({"client-id": "throttled"}, set={"producer_byte_rate": 4096})
    values = [b"x" * 1000 for _ in range(20)]  # ~20 KB a request: five seconds' worth of the quota

    def throttle_ms(sock, client_id: str, n: int) -> int:
        sock.sendall(_produce(kafka_topic, values, client_id=client_id, correlation_id=n))
        answer = ProduceResponse.decode(_read_frame(sock), version=9, header=True)
        assert answer.responses[0].partition_responses[0].error_code == 0
        return answer.throttle_time_ms

    with _connect(bootstrap) as sock:
        seen = []
        wait_for(lambda: seen.append(throttle_ms(sock, "throttled", len(seen))) or seen[-1] > 0,
                 what="a throttle time once the broker follows the quota")
        throttled = seen[-1]
        assert throttled >= 1000  # five seconds' worth sent: about that long to wait
        started = time.monotonic()
        throttle_ms(sock, "throttled", 99)  # the connection was muted for the throttle time first
        assert time.monotonic() - started >= throttled / 1000 * 0.9
    with _connect(bootstrap) as sock:  # another client id has no quota
        assert [throttle_ms(sock, "free", i) for i in range(3)] == [0, 0, 0]
