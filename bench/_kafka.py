"""The benchmarks' Apache Kafka broker: :class:`lakelog.runtime.apache_kafka.KafkaBroker` (the tests of
MirrorMaker 2 start the same one)."""

from lakelog.runtime.apache_kafka import KafkaBroker
from lakelog.runtime.kafka_jars import KAFKA_VERSION

__all__ = ["KAFKA_VERSION", "KafkaBroker"]
