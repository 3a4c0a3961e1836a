"""Spark: a SparkSession with Delta, and topics as SQL tables.

``session()`` builds the SparkSession (Delta configured, ``local[*]`` unless ``spark.master`` says
otherwise); :mod:`lakelog.spark.sql` registers topics as views with the columns of Spark's Kafka source.
"""

from lakelog.spark.errors import DeltaJarsError, SourceError, SourceOptionError
from lakelog.spark.session import ensure_delta_jars, session
from lakelog.spark.source import LakelogDataSource, register
from lakelog.spark.sql import (
    create_topic_view,
    history,
    register_consumer_offsets,
    KAFKA_SOURCE_SCHEMA,
    PartitionLogInfo,
    register_topic_view,
    register_topics_from_gateway,
    topic_dataframe,
)

__all__ = [
    "create_topic_view",
    "DeltaJarsError",
    "KAFKA_SOURCE_SCHEMA",
    "LakelogDataSource",
    "PartitionLogInfo",
    "ensure_delta_jars",
    "history",
    "register",
    "register_consumer_offsets",
    "register_topic_view",
    "register_topics_from_gateway",
    "session",
    "SourceError",
    "SourceOptionError",
    "topic_dataframe",
]
