"""The Kafka listener's topic and cluster admin APIs: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, IncrementalAlterConfigs, AlterConfigs, DescribeCluster and DeleteRecords, each a thin
translation onto the request layer (:class:`~lakelog.requests.handler.RequestHandler`: validation,
authorization and the writes live there, as for the HTTP routes). The ACL APIs are in
:mod:`lakelog.kafka.acl_handlers`.

As Kafka's ``KafkaApis``/``ControllerApis``, each topic (resource, partition) of a request gets its own
error code and message; a topic whose request is refused writes nothing. A topic named twice in one
request answers INVALID_REQUEST for that topic (Kafka's "duplicate topic" rule of the batched message).
Replica assignments are not taken: lakelog places replicas itself (INVALID_REQUEST, with what to do).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from lakelog.config import TopicConfig
from lakelog.kafka import errors as codes
from lakelog.kafka.acl_handlers import AclApis
from lakelog.kafka.codec import response_class
from lakelog.kafka.errors import kafka_error_code
from lakelog.replication.topic_configs import DELETE, SET, known_configs
from lakelog.requests import CreateTopicRequest, DeleteRecordsRequest, RequestContext, RequestHandler

__all__ = ["AdminApis", "admin_handlers"]

log = logging.getLogger(__name__)

_ZERO_UUID = uuid.UUID(int=0)
#: Kafka's ConfigResource.Type
_TOPIC, _BROKER = 2, 4
#: Kafka's DescribeConfigsResponse ConfigSource by lakelog's source names
_CONFIG_SOURCES = {"DYNAMIC_TOPIC_CONFIG": 1, "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5}
#: Kafka's ConfigType (DescribeConfigs v3+)
_BOOLEAN, _STRING, _LONG, _DOUBLE, _LIST = 1, 2, 5, 6, 7
#: Kafka's IncrementalAlterConfigs OpType: SET, DELETE (APPEND 2 and SUBTRACT 3 are not taken)
_OPS = {0: SET, 1: DELETE}
#: DescribeCluster v1 endpoint types: brokers (1), controllers (2)
_BROKERS_ENDPOINT = 1

Handler = Callable[[Any, int, RequestContext], Awaitable[Any]]


def _topic_uuid(topic_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(topic_id)
    except (ValueError, TypeError, AttributeError):
        return _ZERO_UUID


def _config_type(name: str) -> int:
    """Kafka's ConfigType of topic config ``name`` (from :class:`TopicConfig`'s field types)."""
    if name == "cleanup.policy":
        return _LIST
    for field in TopicConfig.model_fields.values():
        if field.alias == name:
            kind = {bool: _BOOLEAN, int: _LONG, float: _DOUBLE}.get(field.annotation)  # type: ignore[arg-type]
            return kind or _STRING
    return _STRING


def _documentation(name: str) -> str | None:
    for field in TopicConfig.model_fields.values():
        if field.alias == name:
            return field.description
    return None


class AdminApis:
    """The topic and cluster admin APIs of one listener.

    Args:
        requests: the broker's request layer. listener: the listener's name (DescribeCluster answers each
        broker's endpoint of it). cluster_id: the cluster's id once the broker started.
    """

    def __init__(self, *, requests: RequestHandler, listener: str, cluster_id: Callable[[], str]) -> None:
        self.requests = requests
        self.listener = listener
        self.cluster_id = cluster_id

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler of every API here."""
        return {19: self.create_topics, 20: self.delete_topics, 37: self.create_partitions,
                32: self.describe_configs, 44: self.incremental_alter_configs, 33: self.alter_configs,
                60: self.describe_cluster, 21: self.delete_records}

    @staticmethod
    def _code(error: Exception, what: str, *, authorization: int = codes.TOPIC_AUTHORIZATION_FAILED) -> int:
        code = kafka_error_code(error, authorization=authorization)
        if code == codes.UNKNOWN_SERVER_ERROR:
            log.error("%s failed", what, exc_info=error)
        return code

    # -- CreateTopics, DeleteTopics, CreatePartitions --------------------------------------------------

    async def create_topics(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's CreateTopics (v2-7): each topic through the request layer's create (``validate_only``:
        checked, not written); -1 partitions or replication factor take the broker's ``num.partitions`` /
        ``default.replication.factor``. v5+ answers the topic's partitions, replication factor and configs."""
        cls = response_class(19)
        result_cls = cls.CreatableTopicResult
        validate_only = bool(getattr(body, "validate_only", False))
        twice = {name for name, n in Counter(t.name for t in body.topics).items() if n > 1}

        async def one(t: Any) -> Any:
            def refused(code: int, message: str) -> Any:
                return result_cls(version=version, name=t.name, topic_id=_ZERO_UUID, error_code=code,
                                  error_message=message, topic_config_error_code=0, num_partitions=-1,
                                  replication_factor=-1, configs=None)
            if t.name in twice:
                return refused(codes.INVALID_REQUEST, f"Topic '{t.name}' is named more than once in this "
                                                      "CreateTopics request; name it once. Nothing was created.")
            if t.assignments:
                return refused(codes.INVALID_REQUEST, "Replica assignments are not supported: lakelog places "
                                                      "replicas itself. Give num_partitions and replication_factor "
                                                      "(or -1 for the broker's defaults) and no assignments.")
            try:
                meta = await self.requests.create_topic(CreateTopicRequest(
                    name=t.name, partitions_count=None if t.num_partitions == -1 else t.num_partitions,
                    replication_factor=None if t.replication_factor == -1 else t.replication_factor,
                    configs={c.name: c.value for c in t.configs}), context=context, validate_only=validate_only)
                entries = meta.config_entries()
            except Exception as e:
                return refused(self._code(e, f"CreateTopics of {t.name!r}"), str(e))
            configs_cls = result_cls.CreatableTopicConfigs
            return result_cls(
                version=version, name=t.name, topic_id=_topic_uuid(meta.topic_id), error_code=codes.NONE,
                error_message=None, topic_config_error_code=0, num_partitions=meta.partitions_count,
                replication_factor=meta.replication_factor, configs=[configs_cls(
                    version=version, name=e.name, value=e.value, read_only=False,
                    config_source=_CONFIG_SOURCES.get(e.source, 0), is_sensitive=False) for e in entries]
                if version >= 5 else None)  # (v5+)

        results = await asyncio.gather(*(one(t) for t in body.topics))
        return cls(version=version, throttle_time_ms=0, topics=list(results))

    async def delete_topics(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DeleteTopics (v1-6; v6 names topics by name or by topic id)."""
        cls = response_class(20)
        result_cls = cls.DeletableTopicResult
        if version >= 6:
            wanted = [(t.name, t.topic_id if t.topic_id not in (None, _ZERO_UUID) else None) for t in body.topics]
        else:
            wanted = [(name, None) for name in body.topic_names]
        by_id: dict[uuid.UUID, str] = {}
        if any(topic_id is not None for _, topic_id in wanted):
            topics = await self.requests.list_topics(context=context)
            by_id = {_topic_uuid(meta.topic_id): name for name, meta in topics.items()}

        async def one(name: str | None, topic_id: uuid.UUID | None) -> Any:
            def result(code: int, message: str | None, name: str | None = name) -> Any:
                return result_cls(version=version, name=name, topic_id=topic_id or _ZERO_UUID, error_code=code,
                                  error_message=message)
            if topic_id is not None:
                name = by_id.get(topic_id)
                if name is None:
                    return result(codes.UNKNOWN_TOPIC_ID, f"No topic has id {topic_id} (or it is not visible to "
                                                          f"{context.principal}).", None)
            if name is None:
                return result(codes.INVALID_REQUEST, "Name a topic by its name or its id.")
            try:
                await self.requests.delete_topic(name, context=context)
            except Exception as e:
                return result(self._code(e, f"DeleteTopics of {name!r}"), str(e))
            return result(codes.NONE, None)

        results = await asyncio.gather(*(one(name, topic_id) for name, topic_id in wanted))
        return cls(version=version, throttle_time_ms=0, responses=list(results))

    async def create_partitions(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's CreatePartitions (v0-3): each topic grown to ``count`` through the request layer
        (``validate_only``: checked, not written)."""
        cls = response_class(37)
        result_cls = cls.CreatePartitionsTopicResult
        twice = {name for name, n in Counter(t.name for t in body.topics).items() if n > 1}

        async def one(t: Any) -> Any:
            code, message = codes.NONE, None
            if t.name in twice:
                code, message = codes.INVALID_REQUEST, (f"Topic '{t.name}' is named more than once in this "
                                                        "CreatePartitions request; name it once. Nothing changed.")
            elif t.assignments:
                code, message = codes.INVALID_REQUEST, ("Replica assignments are not supported: lakelog places "
                                                        "the new partitions' replicas itself. Give the count alone.")
            else:
                try:
                    await self.requests.create_partitions(t.name, partitions_count=t.count, context=context,
                                                          validate_only=bool(body.validate_only))
                except Exception as e:
                    code, message = self._code(e, f"CreatePartitions of {t.name!r}"), str(e)
            return result_cls(version=version, name=t.name, error_code=code, error_message=message)

        results = await asyncio.gather(*(one(t) for t in body.topics))
        return cls(version=version, throttle_time_ms=0, results=list(results))

    # -- DescribeConfigs, IncrementalAlterConfigs, AlterConfigs ----------------------------------------

    async def describe_configs(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DescribeConfigs (v1-4) of TOPIC resources (the topic's configs over the broker's defaults
        over the built-in ones, with synonyms) and BROKER resources (this broker's Kafka-named settings,
        static; another broker's id answers INVALID_REQUEST, as Kafka's: ask that broker).
        ``configuration_keys`` null: every config."""
        cls = response_class(32)
        result_cls = cls.DescribeConfigsResult
        entry_cls = result_cls.DescribeConfigsResourceResult
        synonyms = bool(getattr(body, "include_synonyms", False))
        documentation = bool(getattr(body, "include_documentation", False))

        async def one(r: Any) -> Any:
            def result(code: int, message: str | None, configs: list) -> Any:
                return result_cls(version=version, error_code=code, error_message=message,
                                  resource_type=r.resource_type, resource_name=r.resource_name, configs=configs)
            keys = set(r.configuration_keys or ()) or None  # null or empty: every config (Kafka's ConfigHelper)
            try:
                if r.resource_type == _TOPIC:
                    meta = await self.requests.describe_topic_configs(r.resource_name, context=context)
                    rows = [entry_cls(
                        version=version, name=e.name, value=e.value, read_only=False,
                        config_source=_CONFIG_SOURCES.get(e.source, 0), is_default=e.is_default,
                        is_sensitive=False, config_type=_config_type(e.name),
                        documentation=_documentation(e.name) if documentation else None,
                        synonyms=[entry_cls.DescribeConfigsSynonym(
                            version=version, name=s.name, value=s.value, source=_CONFIG_SOURCES.get(s.source, 0))
                            for s in e.synonyms] if synonyms else [])
                        for e in meta.config_entries() if keys is None or e.name in keys]
                elif r.resource_type == _BROKER:
                    entries = await self.requests.broker_configs.describe_broker_configs(r.resource_name,
                                                                                        context=context)
                    rows = [entry_cls(
                        version=version, name=e.name, value=e.value, read_only=True,
                        config_source=_CONFIG_SOURCES.get(e.source, 0), is_default=e.source == "DEFAULT_CONFIG",
                        is_sensitive=e.is_sensitive, config_type=_STRING,
                        documentation=e.documentation if documentation else None,
                        synonyms=[entry_cls.DescribeConfigsSynonym(
                            version=version, name=e.name, value=e.value, source=_CONFIG_SOURCES.get(e.source, 0))]
                        if synonyms else [])
                        for e in entries if keys is None or e.name in keys]
                else:
                    return result(codes.INVALID_REQUEST, f"Resource type {r.resource_type} is not served: describe "
                                                         "a TOPIC (2) or a BROKER (4).", [])
            except Exception as e:
                return result(self._code(e, f"DescribeConfigs of {r.resource_name!r}", authorization=(
                    codes.CLUSTER_AUTHORIZATION_FAILED if r.resource_type == _BROKER
                    else codes.TOPIC_AUTHORIZATION_FAILED)), str(e), [])
            return result(codes.NONE, None, rows)

        results = await asyncio.gather(*(one(r) for r in body.resources))
        return cls(version=version, throttle_time_ms=0, results=list(results))

    async def _alter(self, cls: Any, body: Any, version: int, context: RequestContext,
                     changes_of: Callable[[Any], list | str]) -> Any:
        """Each resource's changes (``changes_of``: ConfigChange tuples, or an INVALID_REQUEST message)
        through the request layer's all-or-nothing alter of topic configs."""
        result_cls = cls.AlterConfigsResourceResponse

        async def one(r: Any) -> Any:
            code, message = codes.NONE, None
            if r.resource_type == _BROKER:
                code, message = codes.INVALID_REQUEST, ("lakelog's broker configs are static (server.properties, "
                                                        "LAKELOG_* variables): change them there and restart.")
            elif r.resource_type != _TOPIC:
                code, message = codes.INVALID_REQUEST, (f"Resource type {r.resource_type} is not served: alter a "
                                                        "TOPIC's (2) configs.")
            else:
                changes = changes_of(r)
                if isinstance(changes, str):
                    code, message = codes.INVALID_REQUEST, changes
                else:
                    try:
                        await self.requests.alter_topic_configs(r.resource_name, changes, context=context,
                                                                validate_only=bool(body.validate_only))
                    except Exception as e:
                        code, message = self._code(e, f"altering configs of {r.resource_name!r}"), str(e)
            return result_cls(version=version, error_code=code, error_message=message,
                              resource_type=r.resource_type, resource_name=r.resource_name)

        results = await asyncio.gather(*(one(r) for r in body.resources))
        return cls(version=version, throttle_time_ms=0, responses=list(results))

    async def incremental_alter_configs(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's IncrementalAlterConfigs (v0-1) of topics: SET and DELETE, all or nothing per topic
        (APPEND and SUBTRACT answer INVALID_REQUEST: set the whole list instead)."""
        def changes(r: Any) -> list | str:
            out = []
            for c in r.configs:
                op = _OPS.get(c.config_operation)
                if op is None:
                    return (f"Config operation {c.config_operation} of '{c.name}' is not served: use SET (0) or "
                            "DELETE (1); for a list config (cleanup.policy) SET the whole list.")
                out.append((c.name, op, c.value if op == SET else None))
            return out
        return await self._alter(response_class(44), body, version, context, changes)

    async def alter_configs(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's AlterConfigs (v0-2) of topics: the topic's configs become exactly the ones given (each
        other topic config goes back to its default), all or nothing per topic."""
        def changes(r: Any) -> list:
            given = {c.name: c.value for c in r.configs}
            return ([(name, SET, value) if value is not None else (name, DELETE, None) for name, value in given.items()]
                    + [(name, DELETE, None) for name in known_configs() if name not in given])
        return await self._alter(response_class(33), body, version, context, changes)

    # -- DescribeCluster, DeleteRecords ------------------------------------------------------------------

    async def describe_cluster(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DescribeCluster (v0-1): the cluster id, the controller and every live broker's endpoint of
        this listener (v1: controller endpoints, which lakelog has none of, answer MISMATCHED_ENDPOINT_TYPE)."""
        cls = response_class(60)
        endpoint_type = getattr(body, "endpoint_type", _BROKERS_ENDPOINT)
        if endpoint_type != _BROKERS_ENDPOINT:
            return cls(version=version, throttle_time_ms=0, error_code=codes.MISMATCHED_ENDPOINT_TYPE,
                       error_message="lakelog's brokers have no controller endpoints: describe the brokers (endpoint "
                                     "type 1).", endpoint_type=endpoint_type, cluster_id=self.cluster_id() or "",
                       controller_id=-1, brokers=[])
        brokers = await self.requests.metadata.brokers()
        controller = await self.requests.metadata.controller_id()
        rows = []
        for info in sorted(brokers.values(), key=lambda b: b.broker_id):
            endpoint = info.kafka_endpoint(self.listener)
            if endpoint is not None:
                rows.append(cls.DescribeClusterBroker(version=version, broker_id=info.broker_id, host=endpoint[0],
                                                      port=endpoint[1], rack=info.rack, is_fenced=False))
        return cls(version=version, throttle_time_ms=0, error_code=codes.NONE, error_message=None,
                   endpoint_type=endpoint_type, cluster_id=self.cluster_id() or "",
                   controller_id=-1 if controller is None else controller, brokers=rows)

    async def delete_records(self, body: Any, version: int, context: RequestContext) -> Any:
        """Kafka's DeleteRecords (v0-2): the whole request through the request layer's DeleteRecords (checked
        before anything moves), its error, if any, on every partition; each partition's low watermark."""
        cls = response_class(21)
        topic_cls = cls.DeleteRecordsTopicResult
        part_cls = topic_cls.DeleteRecordsPartitionResult
        code, low = codes.NONE, {}
        try:
            request = DeleteRecordsRequest.of([(t.name, p.partition_index, p.offset)
                                               for t in body.topics for p in t.partitions],
                                              timeout_ms=body.timeout_ms)  # the replicas' wait (delayed)
            low = (await self.requests.delete_records(request, context=context)).low_watermarks
        except Exception as e:
            code = self._code(e, "DeleteRecords")
        return cls(version=version, throttle_time_ms=0, topics=[topic_cls(version=version, name=t.name, partitions=[
            part_cls(version=version, partition_index=p.partition_index, low_watermark=low.get((t.name, p.partition_index), -1),
                     error_code=code) for p in t.partitions]) for t in body.topics])


def admin_handlers(*, requests: RequestHandler, listener: str, cluster_id: Callable[[], str]) -> dict[int, Handler]:
    """api key -> handler of the admin APIs (:class:`AdminApis`) and the ACL APIs
    (:class:`~lakelog.kafka.acl_handlers.AclApis`) of one listener."""
    return {**AdminApis(requests=requests, listener=listener, cluster_id=cluster_id).handlers(),
            **AclApis(requests=requests).handlers()}
