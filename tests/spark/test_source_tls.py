"""The source and sink against a TLS broker that requires client certificates: lakelog.ssl.* files reach the
driver's look-ups, the executors' fetches and the sink's produce requests."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.security.certificates import CertificateAuthority
from lakelog.spark import source
from lakelog.spark.source import SinkOptions, SourceOptions


def test_ssl_options_become_client_arguments():
    base = {"lakelog.bootstrap.servers": "h:1", "subscribe": "t"}
    files = {"lakelog.ssl.cafile": "/ca.pem", "lakelog.ssl.certfile": "/c.pem", "lakelog.ssl.keyfile": "/k.pem"}
    tls = {"ssl_cafile": "/ca.pem", "ssl_certfile": "/c.pem", "ssl_keyfile": "/k.pem"}
    opts = SourceOptions.parse({**base, **files}, streaming=True)
    assert opts.tls == tls and source.tail_fetch(opts).tls == tls
    assert SourceOptions.parse(base, streaming=False).tls == {}
    assert SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "lakelog.ssl.cafile": "/ca.pem"}).tls == \
        {"ssl_cafile": "/ca.pem"}


@pytest.fixture(scope="module")
def lakelog_spark(spark):
    source.register(spark)
    return spark


@pytest.mark.spark
def test_read_and_write_a_tls_broker(lakelog_spark, broker_factory, topic_name, tmp_path):
    spark = lakelog_spark
    ca = CertificateAuthority.create(tmp_path / "tls")
    server = ca.issue("broker-0", common_name="broker", hosts=["localhost", "127.0.0.1"], server=True)
    broker = broker_factory(0, extra_env={"LAKELOG_SSL_CLIENT_AUTH": "required"}, ssl_certfile=server.certfile,
                            ssl_keyfile=server.keyfile, ssl_cafile=server.cafile)
    etl = ca.issue("etl", common_name="etl")
    tls = {"ssl_cafile": str(ca.cafile), "ssl_certfile": str(etl.certfile), "ssl_keyfile": str(etl.keyfile)}
    options = {f"lakelog.{k.replace('_', '.')}": v for k, v in tls.items()}
    with LakelogClient(broker.url, **tls) as client:
        client.create_topic(topic_name, partitions=2, configs={"lake.commit.interval.ms": "0"})
        client.create_topic(f"{topic_name}-out", partitions=1)
        for p in range(2):
            client.produce_arrow(topic_name, p, pa.table({"value": pa.array([b"%d-%d" % (p, i) for i in range(5)])}))

    reader = spark.read.format("lakelog").option("kafka.bootstrap.servers", f"127.0.0.1:{broker.port}") \
        .option("subscribe", topic_name).option("lakelog.read.mode", "broker")  # executors fetch over TLS
    with pytest.raises(Exception, match="ssl.cafile"):  # no CA: the driver's look-up is not verified
        reader.load().collect()
    df = reader.options(**options).load()
    assert sorted(bytes(r.value) for r in df.collect()) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(5))

    (df.select("value").write.format("lakelog").option("lakelog.bootstrap.servers", f"127.0.0.1:{broker.port}")
     .option("topic", f"{topic_name}-out").options(**options).mode("append").save())
    with LakelogClient(broker.url, **tls) as client:
        assert sum(log["high_watermark"] for log in client.topic_logs(f"{topic_name}-out")) == 10
