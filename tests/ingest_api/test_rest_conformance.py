"""Route by route, the v2 and v3 status codes, Content-Types, body shapes and error codes that Confluent's
REST Proxy documents and its clients expect (issue 38, points 1, 2, 3 and 5).

Sources: kafka-rest ``Errors.java`` (error codes), ``resources/v2/*.java`` (``@Produces`` / ``@Consumes``:
406 and 415), ``entities/v2/*ProduceRequest.java`` (``@NotEmpty`` records: 422), ``CommitOffsetsResponse``
(a commit answers a JSON list), ``KafkaRestExceptionMapper`` (a JSON consumer's ``SerializationException``:
408 / 40801); rest-utils ``JsonParseExceptionMapper`` / ``JsonMappingExceptionMapper`` (malformed JSON, an
unknown field: 400). One real broker serves the module; every test works in its own topics and groups.
"""

from __future__ import annotations

import base64
import uuid

import httpx
import orjson
import pytest

from lakelog.client import LakelogClient
from lakelog.protocol import media_types
from tests.harness import wait_for

V2 = media_types.V2
BINARY = media_types.BINARY_V2
JSON_V2 = media_types.JSON_V2


def new_topic(api: LakelogClient, partitions: int = 1, configs: dict | None = None) -> str:
    name = f"conf-{uuid.uuid4().hex[:10]}"
    api.create_topic(name, partitions=partitions, configs=configs)
    return name


def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def b64(x: bytes) -> str:
    return base64.b64encode(x).decode()


def post(http: httpx.Client, path: str, body, content_type: str | None, **headers) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    if content_type is not None:
        headers["Content-Type"] = content_type
    return http.post(path, content=content, headers=headers)


def error(resp: httpx.Response, status: int, code: int | None = None, *words: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    if code is not None:
        assert body["error_code"] == code, body
    for word in words:
        assert word in body["message"], body
    return body["message"]


def end_offset(http: httpx.Client, topic: str, partition: int = 0) -> int:
    resp = http.get(f"/topics/{topic}/partitions/{partition}/offsets")
    assert resp.status_code == 200, resp.text
    return resp.json()["end_offset"]


def new_instance(http: httpx.Client, g: str, fmt: str = "binary") -> str:
    """A consumer instance of group ``g``: its path."""
    name = f"i-{uuid.uuid4().hex[:8]}"
    resp = http.post(f"/consumers/{g}", json={"name": name, "format": fmt})
    assert resp.status_code == 200, resp.text
    return f"/consumers/{g}/instances/{name}"


# -- 1. error codes mean what Confluent's mean ---------------------------------------------------

def test_record_too_large_takes_lakelogs_code_not_confluents_key_schema_missing(api, http):
    topic = new_topic(api, configs={"max.message.bytes": "1000"})
    resp = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"x" * 2000)}]}, BINARY)
    code = error(resp, 422, None, "max.message.bytes=1000")
    assert code and resp.json()["error_code"] == 42225  # Confluent's 42201: key schema missing
    assert end_offset(http, topic) == 0


def test_offset_out_of_range_takes_lakelogs_code_not_confluents_value_schema_missing(api, http):
    topic = new_topic(api)
    resp = http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 5, "max_wait_ms": 0})
    error(resp, 422, 42226, "Offset 5")  # Confluent's 42202: value schema missing


def test_an_unknown_group_is_confluents_consumer_group_id_not_found(http):
    resp = http.get(f"/v3/clusters/{http.get('/v3/clusters').json()['data'][0]['cluster_id']}"
                    f"/consumer-groups/{group()}")
    error(resp, 404, 40405)


def test_a_subscription_shape_is_not_an_invalid_consumer_config(http):
    path = new_instance(http, group())
    resp = http.post(f"{path}/subscription", json={"topics": ["a"], "topic_pattern": "b.*"})
    error(resp, 422, 42227, "not both")  # Confluent's 42204: invalid consumer configuration
    resp = http.post(f"/consumers/{group()}", json={"format": "cbor"})
    error(resp, 422, None)


# -- 2. request shapes as Confluent validates them ----------------------------------------------

@pytest.mark.parametrize("fmt, records", [
    (BINARY, []),
    (JSON_V2, []),
    (BINARY, [{}]),
    (JSON_V2, [{"headers": []}]),
    (JSON_V2, [{"value": 1}, {"timestamp": 5}]),
])
def test_an_empty_records_list_or_a_record_with_nothing_is_422_and_writes_nothing(api, http, fmt, records):
    topic = new_topic(api)
    resp = post(http, f"/topics/{topic}", {"records": records}, fmt)
    error(resp, 422, 42222, "Nothing was written")
    assert end_offset(http, topic) == 0


@pytest.mark.parametrize("fmt, record", [(JSON_V2, {"valur": 1}), (BINARY, {"value": b64(b"v"), "partitio": 0})])
def test_an_unknown_field_is_refused_as_jackson_refuses_it(api, http, fmt, record):
    topic = new_topic(api)
    resp = post(http, f"/topics/{topic}", {"records": [record]}, fmt)
    error(resp, 400, 40001, "Extra inputs are not permitted")  # today {"valur": 1} writes a null record
    assert end_offset(http, topic) == 0


@pytest.mark.parametrize("fmt, value", [(JSON_V2, "x" * 100), (JSON_V2, 7), (BINARY, b64(b"v" * 100))])
def test_an_unknown_field_in_a_large_body_is_refused_too(api, http, fmt, value):
    """Bodies of more than 32 KiB are decoded in columns (pyarrow's reader skips members its schema does not
    name): an unknown field beside known ones in record 900 of 1,000 is still refused, and nothing is written."""
    topic = new_topic(api)
    records = [{"value": value, "partition": 0} for _ in range(1_000)]
    records[900]["valur"] = 1
    resp = post(http, f"/topics/{topic}", {"records": records}, fmt)
    error(resp, 400, 40001, "records[900].valur", "Extra inputs are not permitted")
    assert end_offset(http, topic) == 0


def test_a_record_header_needs_a_key(api, http):
    topic = new_topic(api)
    resp = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"v"), "headers": [{"value": b64(b"h")}]}]},
                BINARY)
    error(resp, 422, 42222, "headers[0] has no key")
    assert end_offset(http, topic) == 0


def test_produce_with_no_body_is_422_and_with_no_content_type_415(api, http):
    topic = new_topic(api)
    error(http.post(f"/topics/{topic}", content=b"", headers={"Content-Type": BINARY}), 422, 42222, "empty")
    error(http.post(f"/topics/{topic}", content=b'{"records": [{"value": "dg=="}]}'), 415, 41501)
    error(http.post(f"/topics/{topic}"), 415, 41501)
    assert end_offset(http, topic) == 0


def test_consumer_create_and_subscribe_without_content_type_are_415(api, http):
    g = group()
    error(http.post(f"/consumers/{g}", content=b'{"name": "a"}'), 415, 41501, "no Content-Type")
    error(http.post(f"/consumers/{g}", content=b'{"name": "a"}', headers={"Content-Type": "text/plain"}),
          415, 41501)
    path = new_instance(http, g)
    topic = new_topic(api)
    body = orjson.dumps({"topics": [topic]})
    error(http.post(f"{path}/subscription", content=body), 415, 41501)
    for content_type in (V2, BINARY, "application/json"):
        resp = http.post(f"{path}/subscription", content=body, headers={"Content-Type": content_type})
        assert resp.status_code == 204, resp.text


# -- 3. response shapes ------------------------------------------------------------------------

def test_v2_routes_answer_the_v2_content_type(api, http):
    topic = new_topic(api)
    for path in ("/brokers", "/topics", f"/topics/{topic}", f"/topics/{topic}/partitions",
                 f"/topics/{topic}/partitions/0", f"/topics/{topic}/partitions/0/offsets"):
        resp = http.get(path)
        assert resp.status_code == 200, (path, resp.text)
        assert resp.headers["content-type"] == V2, path
    resp = post(http, f"/topics/{topic}", {"records": [{"value": b64(b"v")}]}, BINARY)
    assert resp.status_code == 200 and resp.headers["content-type"] == V2
    assert resp.json()["offsets"] == [{"partition": 0, "offset": 0, "error_code": None, "error": None}]
    assert resp.json()["key_schema_id"] is None and resp.json()["value_schema_id"] is None


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "application/vnd.kafka.v2+json;q=0"])
def test_an_accept_a_v2_route_cannot_serve_is_406(api, http, accept):
    topic = new_topic(api)
    for path in ("/brokers", "/topics", f"/topics/{topic}", f"/topics/{topic}/partitions/0/offsets"):
        error(http.get(path, headers={"Accept": accept}), 406, 40602)
    for path in (f"/topics/{topic}", f"/topics/{topic}/partitions/0", f"/topics/{topic}/partitions/0/records"):
        error(post(http, path, {"records": [{"value": b64(b"v")}]}, BINARY, Accept=accept), 406, 40602)
    assert end_offset(http, topic) == 0  # refused before anything was written
    path = new_instance(http, group())
    error(http.get(f"{path}/subscription", headers={"Accept": accept}), 406, 40602)


@pytest.mark.parametrize("accept", [None, "*/*", V2, "application/json", f"text/html, {V2}"])
def test_accepts_a_v2_route_serves(api, http, accept):
    headers = {} if accept is None else {"Accept": accept}
    for path in ("/brokers", "/topics"):
        resp = http.get(path, headers=headers)
        assert resp.status_code == 200 and resp.headers["content-type"] == V2, (path, resp.text)


def test_a_commit_answers_confluents_empty_list_as_v2_json(api, http):
    topic = new_topic(api)
    post(http, f"/topics/{topic}", {"records": [{"value": b64(b"v")}]}, BINARY)
    path = new_instance(http, group())
    assert http.post(f"{path}/assignments", json={"partitions": [{"topic": topic, "partition": 0}]}).status_code == 204
    resp = http.post(f"{path}/offsets", json={"offsets": [{"topic": topic, "partition": 0, "offset": 0}]})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == V2
    assert resp.json() == []
    resp = http.post(f"{path}/offsets")  # no body: everything fetched
    assert resp.status_code == 200 and resp.json() == [] and resp.headers["content-type"] == V2


def test_a_json_instance_refuses_bytes_that_are_not_json_with_confluents_error(api, http):
    topic = new_topic(api)
    values = [b'{"a": 1}', b"\xff\x00 not json", b'"x"']
    post(http, f"/topics/{topic}", {"records": [{"value": b64(v)} for v in values]}, BINARY)
    path = new_instance(http, group(), fmt="json")
    assert http.post(f"{path}/assignments", json={"partitions": [{"topic": topic, "partition": 0}]}).status_code == 204
    assert http.post(f"{path}/positions/beginning",
                     json={"partitions": [{"topic": topic, "partition": 0}]}).status_code == 204

    def read():
        resp = http.get(f"{path}/records", params={"timeout": 1000}, headers={"Accept": JSON_V2})
        return resp if resp.status_code != 200 or resp.json() else None

    resp = wait_for(read, timeout_s=60, what="a read of the partition")
    error(resp, 408, 40801, "at offset 1", "not", "JSON")  # today: 200 with a JSON string of the bytes
    # the position stayed: the next read meets the same record, and a seek past it reads on
    error(wait_for(read, timeout_s=60, what="a second read"), 408, 40801, "at offset 1")
    assert http.post(f"{path}/positions", json={"offsets": [{"topic": topic, "partition": 0, "offset": 2}]}
                     ).status_code == 204
    resp = wait_for(read, timeout_s=60, what="a read past the record")
    assert resp.status_code == 200 and [r["value"] for r in resp.json()] == ["x"]


# -- 5. validation at every entry --------------------------------------------------------------

@pytest.mark.parametrize("name", ["../evil", ".", "..", "a/../b", "x" * 250, "sp ace", ""])
def test_a_subscription_to_a_name_no_topic_can_have_is_refused(api, http, name):
    path = new_instance(http, group())
    resp = http.post(f"{path}/subscription", json={"topics": [name]})
    assert resp.status_code in (400, 422), resp.text  # today ["../evil"] is 204 and breaks the group's rebalance
    assert resp.json()["error_code"] in (40004, 42222), resp.text
    assert http.get(f"{path}/subscription").json() == {"topics": []}


@pytest.mark.parametrize("route, body", [
    ("assignments", {"partitions": [{"topic": "../evil", "partition": 0}]}),
    ("positions", {"offsets": [{"topic": "..", "partition": 0, "offset": 0}]}),
    ("positions/beginning", {"partitions": [{"topic": "a/b", "partition": 0}]}),
    ("offsets", {"offsets": [{"topic": ".", "partition": 0, "offset": 0}]}),
])
def test_topic_names_follow_the_rule_wherever_they_enter(http, route, body):
    path = new_instance(http, group())
    error(http.post(f"{path}/{route}", json=body), 400, 40004, "Topic name")


@pytest.mark.parametrize("route, body", [
    ("assignments", {"partitions": [{"topic": "t", "partition": False}]}),
    ("positions", {"offsets": [{"topic": "t", "partition": 0, "offset": True}]}),
    ("offsets", {"offsets": [{"topic": "t", "partition": True, "offset": 0}]}),
])
def test_booleans_are_not_integers(http, route, body):
    path = new_instance(http, group())
    error(http.post(f"{path}/{route}", json=body), 422, 42222, "integer")


def test_an_unknown_topic_config_with_a_null_value_is_refused(api, http):
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    name = f"conf-{uuid.uuid4().hex[:10]}"
    resp = http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": name, "partitions_count": 1,
                                                              "configs": [{"name": "retention.mss", "value": None}]})
    error(resp, 400, 40003, "unknown config 'retention.mss'")
    assert http.get(f"/topics/{name}").status_code == 404
    resp = http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": name, "partitions_count": 1,
                                                              "configs": [{"name": "retention.ms", "value": None}]})
    assert resp.status_code == 201, resp.text  # a known config with a null value: its default


def test_group_ids_and_instance_names_have_kafkas_length_limit(http):
    resp = http.post(f"/consumers/{'g' * 10_000}", json={"name": "a"})
    assert resp.status_code == 400 and resp.json()["error_code"] in (40001, 40008), resp.text
    resp = http.post(f"/consumers/{'g' * 250}", json={"name": "a"})
    assert resp.status_code == 400 and resp.json()["error_code"] in (40001, 40008), resp.text
    resp = http.post(f"/consumers/{group()}", json={"name": "i" * 10_000})
    assert resp.status_code == 422, resp.text
    path = new_instance(http, "g" * 249)  # the limit itself is a group id
    assert http.delete(path).status_code == 204


@pytest.mark.parametrize("method, path, content_type", [
    ("POST", "/topics/{topic}", BINARY),
    ("POST", "/v3/clusters/{cluster}/topics", "application/json"),
    ("POST", "/v3/clusters/{cluster}/topics/{topic}/records", "application/json"),
    ("POST", "/consumers/{group}", V2),
    ("POST", "/v3/clusters/{cluster}/acls", "application/json"),
])
def test_malformed_json_gets_the_same_clear_error_on_every_route(api, http, method, path, content_type):
    topic = new_topic(api)
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    url = path.format(topic=topic, cluster=cluster, group=group())
    resp = http.request(method, url, content=b'{"records": [', headers={"Content-Type": content_type})
    error(resp, 400, 40001, "The body is not valid JSON")


def test_the_openapi_document_states_the_limits_and_enums(http):
    doc = http.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]

    def prop(schema: str, name: str) -> dict:
        p = schemas[schema]["properties"][name]
        return p.get("anyOf", [p])[0] if "anyOf" in p else p

    topic_name = schemas["TopicPartitionRef"]["properties"]["topic"]
    assert topic_name["maxLength"] == 249 and topic_name["pattern"] == r"^[a-zA-Z0-9._-]+$"
    assert schemas["SubscriptionRequest"]["oneOf"] == [{"required": ["topics"]}, {"required": ["topic_pattern"]}]
    assert prop("SubscriptionRequest", "topics")["items"]["maxLength"] == 249
    assert "At most 10000" in schemas["CreateTopicRequest"]["properties"]["partitions_count"]["description"]
    assert schemas["UpdatePartitionCountRequest"]["properties"]["partitions_count"]["maximum"] == 10_000
    assert prop("CreateTopicRequest", "topic_name")["maxLength"] == 249
    assert prop("CreateConsumerRequest", "consumer.request.timeout.ms")["maximum"] == 60_000
    assert prop("CreateConsumerRequest", "name")["maxLength"] == 249
    assert prop("CreateAclRequestData", "resource_type")["enum"] == ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]
    assert prop("CreateAclRequestData", "permission")["enum"] == ["ALLOW", "DENY"]
    assert "IDEMPOTENT_WRITE" in prop("CreateAclRequestData", "operation")["enum"]
    assert prop("TopicPartitionRef", "partition")["type"] == "integer"
    assert schemas["JsonProduceRequest"]["properties"]["records"]["minItems"] == 1
    assert schemas["JsonRecord"]["additionalProperties"] is False
    assert schemas["Header"]["required"] == ["key"]
    group_param = next(p for p in doc["paths"]["/consumers/{group}"]["post"]["parameters"] if p["name"] == "group")
    assert group_param["schema"]["maxLength"] == 249 and "pattern" in group_param["schema"]
    for path in ("/brokers", "/topics"):
        assert list(doc["paths"][path]["get"]["responses"]["200"]["content"]) == [V2], path


# -- v3 ----------------------------------------------------------------------------------------

def test_v3_topic_routes_answer_confluents_shapes(api, http):
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    name = f"conf-{uuid.uuid4().hex[:10]}"
    resp = http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": name, "partitions_count": 2})
    assert resp.status_code == 201 and resp.headers["content-type"] == "application/json", resp.text
    body = resp.json()
    assert (body["kind"], body["topic_name"], body["partitions_count"]) == ("KafkaTopic", name, 2)
    assert body["metadata"]["self"].endswith(f"/v3/clusters/{cluster}/topics/{name}")
    error(http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": name, "partitions_count": 2}), 400, 40002)
    error(http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": "a/b", "partitions_count": 1}), 400, 40004)
    error(http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": "x", "partitions_count": True}), 422, 42222)
    error(http.get(f"/v3/clusters/no-such-cluster/topics/{name}"), 404, 40409)
    error(http.get(f"/v3/clusters/{cluster}/topics/no-{name}"), 404, 40401)
    resp = http.post(f"/v3/clusters/{cluster}/topics/{name}/records",
                     json={"partition_id": 1, "value": {"type": "JSON", "data": {"a": 1}}})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["error_code"], resp.json()["partition_id"], resp.json()["offset"]) == (200, 1, 0)
    error(http.post(f"/v3/clusters/{cluster}/topics/{name}/records",
                    json={"partition_id": False, "value": {"type": "JSON", "data": 1}}), 422, 42222)


def test_a_topic_of_the_longest_name_the_document_states_is_created_and_deleted(http):
    """The OpenAPI document allows 249 characters: the broker takes them through a topic's life (its log's
    directory, renamed for deletion, keeps within 255 bytes as Kafka's logDeleteDirName)."""
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    name = uuid.uuid4().hex + "n" * (249 - 32)
    resp = http.post(f"/v3/clusters/{cluster}/topics", json={"topic_name": name, "partitions_count": 1})
    assert resp.status_code == 201, resp.text
    assert post(http, f"/topics/{name}", {"records": [{"value": b64(b"v")}]}, BINARY).status_code == 200
    resp = http.delete(f"/v3/clusters/{cluster}/topics/{name}")
    assert resp.status_code == 204, resp.text  # was 500: the renamed directory's name was over 255 bytes
    wait_for(lambda: http.get(f"/topics/{name}").status_code == 404, timeout_s=60, what="the topic gone")

