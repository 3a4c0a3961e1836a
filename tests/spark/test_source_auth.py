"""The source and sink against brokers with authentication.methods=basic: lakelog.auth.* credentials reach the
driver's look-ups, the executors' fetches and the sink's produce requests."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.client import LakelogClient
from lakelog.spark import source
from lakelog.spark.source import SinkOptions, SourceOptions

PASSWORD = "inter-broker-s3cret"
SECURE = {"LAKELOG_AUTHENTICATION_METHODS": "basic", "LAKELOG_INTER_BROKER_PASSWORD": PASSWORD}


def test_credentials_go_together_and_stay_out_of_reprs():
    base = {"lakelog.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = SourceOptions.parse({**base, "lakelog.auth.username": "etl", "lakelog.auth.password": "pw-123"},
                               streaming=True)
    assert opts.auth == ("etl", "pw-123") and "pw-123" not in repr(opts)
    assert source.tail_fetch(opts).auth == ("etl", "pw-123") and "pw-123" not in repr(source.tail_fetch(opts))
    with pytest.raises(source.SourceOptionError, match="go together"):
        SourceOptions.parse({**base, "lakelog.auth.username": "etl"}, streaming=False)
    sink = SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "lakelog.auth.username": "etl",
                              "lakelog.auth.password": "pw-123"})
    assert sink.auth == ("etl", "pw-123") and "pw-123" not in repr(sink)


def test_a_bearer_token_reaches_the_executors_pickled_and_stays_out_of_reprs():
    import pickle

    from lakelog.client import BearerToken

    base = {"lakelog.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = SourceOptions.parse({**base, "lakelog.auth.token": "eyJ.tok-en.sig"}, streaming=True)
    assert opts.auth == BearerToken("eyJ.tok-en.sig") and "tok-en" not in repr(opts)
    fetch = pickle.loads(pickle.dumps(source.tail_fetch(opts)))  # what an executor receives
    assert fetch.auth == BearerToken("eyJ.tok-en.sig") and "tok-en" not in repr(fetch)
    with fetch.client() as client:  # the executor's requests carry it
        assert next(client.auth.auth_flow(client.http.build_request("GET", "/t"))).headers["Authorization"] == \
            "Bearer eyJ.tok-en.sig"
    with pytest.raises(source.SourceOptionError, match="not both"):
        SourceOptions.parse({**base, "lakelog.auth.token": "t", "lakelog.auth.username": "etl"}, streaming=False)
    with pytest.raises(source.SourceOptionError, match="lakelog.auth.token"):
        SourceOptions.parse({**base, "lakelog.auth.token": " "}, streaming=False)
    sink = SinkOptions.parse({"lakelog.bootstrap.servers": "h:1", "lakelog.auth.token": "eyJ.tok-en.sig"})
    assert sink.auth == BearerToken("eyJ.tok-en.sig") and "tok-en" not in repr(sink)


@pytest.fixture(scope="module")
def lakelog_spark(spark):
    source.register(spark)
    return spark


@pytest.mark.spark
def test_read_and_write_a_basic_cluster(lakelog_spark, broker_factory, topic_name):
    spark = lakelog_spark
    broker = broker_factory(0, extra_env=SECURE)
    with LakelogClient(broker.url, auth=("broker", PASSWORD)) as admin:
        admin.security.upsert_user("etl", "etl-pw")
    with LakelogClient(broker.url, auth=("etl", "etl-pw")) as etl:
        etl.create_topic(topic_name, partitions=2, configs={"lake.commit.interval.ms": "0"})
        etl.create_topic(f"{topic_name}-out", partitions=1)
        for p in range(2):
            etl.produce_arrow(topic_name, p, pa.table({"value": pa.array([b"%d-%d" % (p, i) for i in range(5)])}))

    def read(**options):
        r = spark.read.format("lakelog").option("kafka.bootstrap.servers", f"127.0.0.1:{broker.port}") \
            .option("subscribe", topic_name).option("lakelog.read.mode", "broker")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    with pytest.raises(Exception, match="40101"):  # no credentials: the driver's look-up is refused
        read().collect()
    df = read(**{"lakelog.auth.username": "etl", "lakelog.auth.password": "etl-pw"})
    assert sorted(bytes(r.value) for r in df.collect()) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(5))

    (df.select("value").write.format("lakelog").option("lakelog.bootstrap.servers", f"127.0.0.1:{broker.port}")
     .option("topic", f"{topic_name}-out").option("lakelog.auth.username", "etl")
     .option("lakelog.auth.password", "etl-pw").mode("append").save())
    with LakelogClient(broker.url, auth=("etl", "etl-pw")) as etl:
        assert sum(log["high_watermark"] for log in etl.topic_logs(f"{topic_name}-out")) == 10


@pytest.mark.spark
def test_read_and_write_an_oauthbearer_broker_with_a_token(lakelog_spark, broker_factory, tmp_path, topic_name):
    import json
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec
    from jwt.algorithms import ECAlgorithm

    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [
        {**json.loads(ECAlgorithm.to_jwk(key.public_key())), "kid": "k1", "use": "sig"}]}))
    token = jwt.encode({"sub": "etl", "exp": int(time.time()) + 600}, key, algorithm="ES256", headers={"kid": "k1"})
    broker = broker_factory(0, extra_env={"LAKELOG_AUTHENTICATION_METHODS": "oauthbearer",
                                          "LAKELOG_INTER_BROKER_PASSWORD": PASSWORD,
                                          "LAKELOG_OAUTH_JWKS_URL": str(tmp_path / "jwks.json")})
    with LakelogClient(broker.url, auth=token) as etl:
        etl.create_topic(topic_name, partitions=2, configs={"lake.commit.interval.ms": "0"})
        etl.create_topic(f"{topic_name}-out", partitions=1)
        for p in range(2):
            etl.produce_arrow(topic_name, p, pa.table({"value": pa.array([b"%d-%d" % (p, i) for i in range(5)])}))
    # read.mode=broker: the executors' fetches go to the leader with the token too
    df = (lakelog_spark.read.format("lakelog").option("kafka.bootstrap.servers", f"127.0.0.1:{broker.port}")
          .option("subscribe", topic_name).option("lakelog.read.mode", "broker").option("lakelog.auth.token", token)
          .load())
    assert sorted(bytes(r.value) for r in df.collect()) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(5))
    (df.select("value").write.format("lakelog").option("lakelog.bootstrap.servers", f"127.0.0.1:{broker.port}")
     .option("topic", f"{topic_name}-out").option("lakelog.auth.token", token).mode("append").save())
    with LakelogClient(broker.url, auth=token) as etl:
        assert sum(log["high_watermark"] for log in etl.topic_logs(f"{topic_name}-out")) == 10
    assert token.split(".")[2] not in broker.log_tail(400)
