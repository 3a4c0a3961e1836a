"""The request layer (layer 3½): one typed operation per request kind, for every front door.

:class:`~lakelog.requests.handler.RequestHandler` is Kafka's ``KafkaApis``: it takes typed requests
(:class:`~lakelog.requests.produce.ProduceRequest`, :class:`~lakelog.requests.fetch.FetchRequest`, ...,
independent of HTTP) and returns typed results or raises :class:`~lakelog.errors.LakelogError`; each
request's rules live here once: validation and forwarding to the leader in the operations, what each
request kind needs of the authorizer in :class:`~lakelog.requests.authorization.RequestPermissions`. The
HTTP gateway (:mod:`lakelog.ingest_api`) is its first adapter.
"""

from lakelog.requests.authorization import RequestPermissions
from lakelog.requests.fetch import FetchRequest, FetchResult, ListOffsetsRequest, ListOffsetsResult
from lakelog.requests.groups import OffsetCommitRequest, ResetOffsetsRequest
from lakelog.requests.handler import RequestHandler
from lakelog.requests.produce import ProduceRequest, ProduceResult
from lakelog.requests.topics import CreateTopicRequest

__all__ = ["CreateTopicRequest", "FetchRequest", "FetchResult", "ListOffsetsRequest", "ListOffsetsResult",
           "OffsetCommitRequest", "ProduceRequest", "ProduceResult", "RequestHandler", "RequestPermissions",
           "ResetOffsetsRequest"]
