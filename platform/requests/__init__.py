"""The request layer (layer 3½): one typed operation per request kind, for every front door.

:class:`~lakelog.requests.handler.RequestHandler` is Kafka's ``KafkaApis``: it takes typed requests
(:class:`~lakelog.requests.produce.ProduceRequest`, :class:`~lakelog.requests.fetch.FetchRequest`, ...,
independent of HTTP) and returns typed results or raises :class:`~lakelog.errors.LakelogError`; each
request's rules live here once: validation, authorization and forwarding to the leader in the operations,
each taking the caller's :class:`~lakelog.requests.context.RequestContext` (what each request kind needs
of the authorizer: :class:`~lakelog.requests.authorization.RequestPermissions`). The HTTP gateway
(:mod:`lakelog.ingest_api`) is its first adapter.
"""

from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.consumer_instances import CreateConsumerInstanceRequest, SubscribeRequest
from lakelog.requests.context import RequestContext
from lakelog.requests.delete_records import DeleteRecordsRequest, DeleteRecordsResult
from lakelog.requests.fetch import FetchRequest, FetchResult, ListOffsetsRequest, ListOffsetsResult
from lakelog.requests.groups import OffsetCommitRequest, ResetOffsetsRequest
from lakelog.requests.handler import RequestHandler
from lakelog.requests.produce import ProduceRequest, ProduceResult
from lakelog.requests.producers import InitProducerIdRequest
from lakelog.requests.topics import CreateTopicRequest
from lakelog.requests.transactions import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)

__all__ = ["AddOffsetsToTxnRequest", "AddPartitionsToTxnRequest", "CreateConsumerInstanceRequest", "CreateTopicRequest", "DeleteRecordsRequest", "DeleteRecordsResult",
           "EndTxnRequest", "FetchRequest", "FetchResult", "InitProducerIdRequest", "ListOffsetsRequest",
           "ListOffsetsResult", "OffsetCommitRequest", "ProduceRequest", "ProduceResult", "RequestContext",
           "RequestHandler", "RequestPermissions", "ResetOffsetsRequest", "SubscribeRequest", "TxnOffsetCommitRequest"]
