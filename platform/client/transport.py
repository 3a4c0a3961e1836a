"""The transport of :class:`~lakelog.client.LakelogClient`: bootstrap servers, the gateway's answers
(errors, quota throttling), leader routing, produce and fetch; the requests about topics, consumer groups,
security and transactions are its facades (:attr:`LakelogClient.admin`, ``.groups``, ``.security``,
``.transactions``), composed, not inherited.

Produce requests are idempotent by default (Kafka's ``enable.idempotence=true``): a producer id, a
sequence per request and retries with the same sequence (:mod:`lakelog.client.idempotent_producer`).

Errors the gateway answers come back as the server's own :class:`~lakelog.errors.LakelogError`
subclass (rebuilt by :func:`~lakelog.protocol.errors.error_from_response`, which knows every class of
:mod:`lakelog.errors`), always also a :class:`~lakelog.client.GatewayError` carrying the REST Proxy
``error_code``, the message and the HTTP status. No answer at all (connection refused or dropped, a
timeout, a TLS failure) is the builtin ``ConnectionError``, never an httpx error.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import orjson
import pyarrow as pa

from lakelog.client.admin import AdminClient
from lakelog.client.answers import answered
from lakelog.client.auth import ClientAuth, http_auth
from lakelog.client.groups import GroupsClient
from lakelog.client.idempotent_producer import IdempotentProducer
from lakelog.client.security import SecurityClient
from lakelog.client.tls import client_ssl_context, describe_tls_failure, disconnect_hint, uses_tls
from lakelog.client.transactions import TransactionsClient
from lakelog.protocol import media_types
from lakelog.protocol.arrow_ipc import arrow_ipc, read_arrow_ipc
from lakelog.protocol.client_id import CLIENT_ID_HEADER
from lakelog.protocol.fetch_requests import NEXT_OFFSET_HEADER, IsolationLevel

__all__ = ["FetchPage", "LakelogClient", "arrow_body", "parse_bootstrap"]


def parse_bootstrap(servers: str | Sequence[str], *, scheme: str = "http") -> list[str]:
    """``"host:port,http://host2:port"`` -> ``["http://host:port", "http://host2:port"]``; an item without a
    scheme gets ``scheme`` (``https`` when the client has TLS settings). Default: ``http``."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in (s.strip() for s in items):
        if item:
            out.append(item.rstrip("/") if "://" in item else f"{scheme}://{item}")
    if not out:
        raise ValueError("no bootstrap server given (e.g. --bootstrap-server localhost:8082)")
    return out


@dataclass(frozen=True)
class FetchPage:
    """One fetch answer.

    Attributes:
        records: a list of REST Proxy records (forms ``binary``, ``json``) or an Arrow table with ``offset``,
            ``timestamp`` (ms, UTC), ``key``, ``value``, ``headers`` (form ``arrow``), in offset order.
        next_offset: where the next fetch of the partition starts (past dropped transaction markers).
        high_watermark, log_start_offset: the partition's, as the leader answered them.
    """

    records: list[dict] | pa.Table
    next_offset: int
    high_watermark: int
    log_start_offset: int


class LakelogClient:
    """Synchronous client of one or more gateways; an idempotent producer by default.

    The transport: bootstrap servers, error answers, quota throttling, leader routing (421), produce and
    fetch. The other requests are its facades, each holding this transport:

    - :attr:`admin` (:class:`~lakelog.client.admin.AdminClient`): topics, their configs and partitions;
    - :attr:`groups` (:class:`~lakelog.client.groups.GroupsClient`): consumer instances, committed offsets,
      lag, members;
    - :attr:`security` (:class:`~lakelog.client.security.SecurityClient`): ACLs, users, client quotas;
    - :attr:`transactions` (:class:`~lakelog.client.transactions.TransactionsClient`): producer ids, the
      transactional producer, the cluster's transactional ids.

    The facades' most used requests (topic creation, partition offsets and logs, group offset commits) are
    also methods of the client, each one line that delegates (``client.create_topic(...)`` is
    ``client.admin.create_topic(...)``).

    Args:
        bootstrap_servers: ``"host:port[,host:port]"`` or URLs; the first that answers is used.
        timeout_s: per-request timeout in seconds. Default: 60.
        enable_idempotence: Kafka's ``enable.idempotence``: every produce request carries a producer id
            (asked of the gateway on the first produce) and the next sequence, and is retried with the same
            sequence on retriable failures, so a retry writes nothing twice
            (:mod:`lakelog.client.idempotent_producer`). False: no producer headers, one try per
            bootstrap server on connection errors, as REST Proxy clients. Default: True.
        delivery_timeout_ms: ``delivery.timeout.ms``: how long an idempotent produce request is retried,
            from its first try. Default: 120000.
        retry_backoff_ms: ``retry.backoff.ms``: the first wait between tries of a produce request; it
            doubles on each retry. Default: 100.
        retry_backoff_max_ms: ``retry.backoff.max.ms``: the longest wait between tries. Default: 1000.
        auth: credentials sent with every request (:mod:`~lakelog.client.auth`): ``(user, password)``
            as HTTP Basic (``authentication.methods`` with ``basic``), a bearer token (``str`` or
            :class:`~lakelog.client.auth.BearerToken`, ``oauthbearer``) or any ``httpx.Auth``.
            Default: None.
        client_id: Kafka's ``client.id``, sent with every request (``X-Lakelog-Client-Id``) for the brokers'
            client quotas. Default: None (no header: the empty client id).
        ssl_cafile: ``ssl.cafile``: PEM CA certificate(s) the gateway's certificate is verified against
            (:mod:`lakelog.client.tls`); with any ``ssl_*`` file, ``host:port`` means ``https://host:port``.
            Default: None (the system's trusted CAs for ``https://`` URLs).
        ssl_certfile: ``ssl.certfile``: PEM client certificate presented to brokers that ask for one
            (``ssl.client.auth``; ``authentication.methods=mtls``). Default: None.
        ssl_keyfile: ``ssl.keyfile``: PEM key of ``ssl_certfile``. Default: None (in ``ssl_certfile``).

    A request refused for a client quota (429 with ``Retry-After``) is sent again after that many seconds,
    while the time since its first try stays within ``timeout_s`` (produce requests: within
    ``delivery.timeout.ms``, with the same sequence), so a throttled client loses nothing.

    Raises:
        ValueError: no bootstrap server, a retry setting out of range, ``auth`` of another kind, or an
            unreadable TLS file.
    """

    def __init__(self, bootstrap_servers: str | Sequence[str] = "localhost:8082", *, timeout_s: float = 60.0,
                 enable_idempotence: bool = True, delivery_timeout_ms: int = 120_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1000, auth: ClientAuth = None, client_id: str | None = None,
                 ssl_cafile: str | None = None, ssl_certfile: str | None = None, ssl_keyfile: str | None = None) -> None:
        tls = {"ssl_cafile": ssl_cafile, "ssl_certfile": ssl_certfile, "ssl_keyfile": ssl_keyfile}
        self.urls = parse_bootstrap(bootstrap_servers, scheme="https" if uses_tls(**tls) else "http")
        self.auth = http_auth(auth)
        self.client_id = client_id
        #: the verifying TLS context of every request (shared by the clients with the same files)
        self.verify: ssl.SSLContext | bool = client_ssl_context(**tls) if uses_tls(**tls) else True
        self.http = httpx.Client(base_url=self.urls[0], timeout=timeout_s, auth=self.auth, verify=self.verify,
                                 headers={CLIENT_ID_HEADER: client_id} if client_id else {})
        self.timeout_s = timeout_s
        self._cluster_id: str | None = None
        self._server = 0  # index in urls of the server idempotent produce requests go to
        #: the producer id, sequences and retries of produce requests (None with enable_idempotence=False;
        #: a transactional producer after :meth:`TransactionsClient.init_transactions`)
        self.producer: IdempotentProducer | None = IdempotentProducer(
            self, delivery_timeout_ms=delivery_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms) if enable_idempotence else None
        self.admin = AdminClient(self)
        self.groups = GroupsClient(self)
        self.security = SecurityClient(self)
        self.transactions = TransactionsClient(self)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "LakelogClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request (``kwargs`` as ``httpx.Client.request``'s) at the first bootstrap server that answers,
        following a 421 to the leader; a 429 sent again after its ``Retry-After`` within ``timeout_s``.

        Returns:
            The 2xx/3xx answer.

        Raises:
            GatewayError: an error answer, as the server's error class.
            ConnectionError: no bootstrap server answered, or a TLS failure (saying what to fix).
        """
        return answered(lambda: self._request_once(method, path, **kwargs), timeout_s=self.timeout_s)

    def _request_once(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        last: Exception | None = None
        for url in [str(self.http.base_url).rstrip("/")] + [u for u in self.urls if u != str(self.http.base_url).rstrip("/")]:
            try:
                resp = self.http.request(method, url + path, **kwargs)
            except httpx.TransportError as e:
                last = e
                tls_failure = describe_tls_failure(e, url=url)
                if tls_failure is not None:
                    raise ConnectionError(tls_failure) from e
                continue
            return self._follow_leader(resp, method, path, **kwargs)
        hint = "" if last is None else disconnect_hint(last, url=self.urls[-1])
        raise ConnectionError(f"no gateway reachable at {', '.join(self.urls)}: {last}{hint}")

    def _follow_leader(self, resp: httpx.Response, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """On 421 Misdirected Request (NotLeader, body names ``leader_url``) resend to the leader, up to 3 hops."""
        for _ in range(3):
            if resp.status_code != 421:
                return resp
            try:
                leader_url = resp.json().get("leader_url")
            except ValueError:
                return resp
            if not leader_url or self.downgrades(leader_url):
                return resp
            try:
                resp = self.http.request(method, leader_url.rstrip("/") + path, **kwargs)
            except httpx.TransportError:
                return resp
        return resp

    def downgrades(self, url: str) -> bool:
        """Whether ``url`` (a broker's answer: a leader's URL, a consumer instance's ``base_uri``) is plain HTTP
        while this client talks HTTPS: credentials never follow it there."""
        return self.urls[0].startswith("https://") and not url.startswith("https://")

    def send_once(self, method: str, path: str, *, timeout_s: float, **kwargs: Any) -> httpx.Response:
        """One try of a request at the current server (an idempotent produce's; following a 421 to the
        leader), with a timeout of at most ``timeout_s`` seconds; the answer whatever its status.

        Raises:
            httpx.TransportError: no answer (connection refused or dropped, timeout).
        """
        if timeout_s < self.timeout_s:
            kwargs["timeout"] = timeout_s
        resp = self.http.request(method, self.urls[self._server] + path, **kwargs)
        return self._follow_leader(resp, method, path, **kwargs)

    def next_server(self) -> None:
        """Idempotent produce requests go to the next bootstrap server from now on."""
        self._server = (self._server + 1) % len(self.urls)

    @property
    def cluster_id(self) -> str:
        """The cluster's id (``GET /v3/clusters``), asked once."""
        if self._cluster_id is None:
            self._cluster_id = self.request("GET", "/v3/clusters").json()["data"][0]["cluster_id"]
        return self._cluster_id

    def init_producer_id(self, *, transactional_id: str | None = None,
                         transaction_timeout_ms: int | None = None) -> dict:
        """:meth:`TransactionsClient.init_producer_id` (the idempotent producer asks it of this client)."""
        return self.transactions.init_producer_id(transactional_id=transactional_id,
                                                  transaction_timeout_ms=transaction_timeout_ms)

    # -- produce --------------------------------------------------------------------------------
    # Each produce method sends one request; with enable_idempotence it carries the producer headers and
    # is retried with the same sequence (see _produce). Errors: GatewayError (the server's class, e.g.
    # UnknownTopicError 40401, OutOfOrderSequenceError 40916), ConnectionError.

    def _produce(self, path: str, body: bytes, content_type: str) -> httpx.Response:
        """POST a produce body: idempotently (producer headers, retries with the same sequence) when
        enabled, else once per bootstrap server on connection errors."""
        headers = {"Content-Type": content_type}
        if self.producer is None:
            return self.request("POST", path, content=body, headers=headers)
        return self.producer.send("POST", path, content=body, headers=headers)

    def produce_json(self, topic: str, records: Iterable[dict], *, partition: int | None = None) -> dict:
        """POST JSON-format records (``{"key": ..., "value": ...}``); returns the REST Proxy response."""
        path = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
        body = orjson.dumps({"records": list(records)})
        return self._produce(path, body, media_types.JSON_V2).json()

    def produce_raw_json(self, topic: str, body: bytes, *, partition: int | None = None,
                         media_type: str = media_types.JSON_V2) -> dict:
        """POST an already encoded JSON-format body; ``media_type`` its embedded format (REST Proxy v2's
        ``json``, or a schema'd one: ``avro``, ``jsonschema``, ``protobuf``, with ``value_schema_id`` ...)."""
        path = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
        return self._produce(path, body, media_type).json()

    def produce_binary(self, topic: str, records: Iterable[tuple[bytes | None, bytes | None]], *,
                       partition: int | None = None) -> dict:
        """POST binary-format records given as ``(key, value)`` byte pairs."""
        def b64(x: bytes | None) -> str | None:
            return None if x is None else base64.b64encode(x).decode()
        path = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
        body = orjson.dumps({"records": [{"key": b64(k), "value": b64(v)} for k, v in records]})
        return self._produce(path, body, media_types.BINARY_V2).json()

    def produce_arrow(self, topic: str, partition: int, table: pa.Table) -> dict:
        """POST an Arrow table (``key``, ``value``, optional ``headers``, ``timestamp``) to one partition.
        The body is encoded once: a retry sends the same bytes with the same sequence."""
        return self._produce(f"/topics/{topic}/partitions/{partition}/records", arrow_ipc(table),
                             media_types.ARROW_STREAM).json()

    def produce_v3(self, topic: str, records: Iterable[dict]) -> list[dict]:
        """POST records to REST Proxy v3's ``/v3/clusters/{cluster_id}/topics/{topic}/records`` in one request:
        JSON objects one after another (Confluent's streaming produce), each a v3 record, e.g.
        ``{"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": {"n": 1}},
        "partition_id": 0}``. The server produces the valid ones as one batch.

        Returns:
            One answer per record, in order: a delivery report ``{"error_code": 200, "partition_id", "offset",
            ...}``, or the record's error ``{"error_code", "message"}`` (:func:`lakelog.errors.for_code` gives
            its class); the records after a failed one were still produced.

        Raises:
            GatewayError: the request as a whole failed (an unknown topic, a missing ACL), or its only record.
        """
        lines = [orjson.dumps(r) for r in records]
        resp = self._produce(f"/v3/clusters/{self.cluster_id}/topics/{topic}/records", b"\n".join(lines),
                             "application/json")
        if len(lines) == 1:
            return [resp.json()]
        return [orjson.loads(line) for line in resp.content.split(b"\r\n") if line.strip()]

    # -- fetch ----------------------------------------------------------------------------------

    def fetch_page(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1024 * 1024,
                   max_wait_ms: int = 0, form: Literal["binary", "json", "arrow"] = "binary",
                   isolation_level: IsolationLevel = "read_uncommitted") -> FetchPage:
        """Records of a partition from ``offset`` and where the next fetch starts (Kafka's fetch; see
        :mod:`lakelog.protocol.fetch_requests`).

        Args:
            topic, partition, offset: what to read (offset >= 0).
            max_bytes: soft limit of the answer's bytes (at least one record comes back). Default: 1 MiB.
            max_wait_ms: long-poll up to this long when nothing is there. Default: 0.
            form: ``binary`` (base64 keys and values), ``json`` or ``arrow``.
            isolation_level: Kafka's ``isolation.level`` (see :data:`~lakelog.protocol.fetch_requests.IsolationLevel`).

        Returns:
            A :class:`FetchPage`; ``next_offset`` is the answer's ``X-Lakelog-Next-Offset``, else (an older
            gateway) the last record's offset + 1, else ``offset``.

        Raises:
            GatewayError: OffsetOutOfRangeError (42226) below the log start offset or past the high
            watermark, UnknownTopicError (40401), UnknownPartitionError, 40001 a bad parameter.
        """
        accept = {"binary": media_types.BINARY_V2, "json": media_types.JSON_V2, "arrow": media_types.ARROW_STREAM}
        resp = self.request("GET", f"/topics/{topic}/partitions/{partition}/records",
                            params={"offset": offset, "max_bytes": max_bytes, "max_wait_ms": max_wait_ms,
                                    "isolation_level": isolation_level}, headers={"Accept": accept[form]})
        records = read_arrow_ipc(resp.content) if form == "arrow" else orjson.loads(resp.content)
        nxt = resp.headers.get(NEXT_OFFSET_HEADER)
        if nxt is None:
            last = (records["offset"][-1].as_py() if records.num_rows else None) if form == "arrow" else (
                records[-1]["offset"] if records else None)
            nxt = offset if last is None else last + 1
        return FetchPage(records, int(nxt), int(resp.headers.get("X-Lakelog-High-Watermark", -1)),
                         int(resp.headers.get("X-Lakelog-Log-Start-Offset", -1)))

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1024 * 1024,
              max_wait_ms: int = 0, form: str = "binary",
              isolation_level: IsolationLevel = "read_uncommitted") -> list[dict]:
        """Fetch JSON-form records (``form`` = ``binary`` or ``json``); page with :meth:`fetch_page`, whose
        ``next_offset`` moves past transaction markers."""
        return self.fetch_page(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                               form="json" if form == "json" else "binary",
                               isolation_level=isolation_level).records  # type: ignore[return-value]

    def fetch_arrow(self, topic: str, partition: int, offset: int, *, max_bytes: int = 16 * 1024 * 1024,
                    max_wait_ms: int = 0, isolation_level: IsolationLevel = "read_uncommitted") -> pa.Table:
        """Fetch records as an Arrow table (``offset``, ``timestamp``, ``key``, ``value``, ``headers``); page
        with :meth:`fetch_page` (``form="arrow"``), whose ``next_offset`` moves past transaction markers."""
        return self.fetch_page(topic, partition, offset, max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                               form="arrow", isolation_level=isolation_level).records  # type: ignore[return-value]

    # -- the facades' most used requests, delegated ---------------------------------------------

    def create_topic(self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
                     configs: dict[str, str] | None = None) -> dict:
        """:meth:`AdminClient.create_topic <lakelog.client.admin.AdminClient.create_topic>`."""
        return self.admin.create_topic(name, partitions=partitions, replication_factor=replication_factor,
                                       configs=configs)

    def partition_offsets(self, topic: str, partition: int, *, timestamp_ms: int | None = None) -> dict:
        """:meth:`AdminClient.partition_offsets <lakelog.client.admin.AdminClient.partition_offsets>`."""
        return self.admin.partition_offsets(topic, partition, timestamp_ms=timestamp_ms)

    def topic_logs(self, topic: str) -> list[dict]:
        """:meth:`AdminClient.topic_logs <lakelog.client.admin.AdminClient.topic_logs>`."""
        return self.admin.topic_logs(topic)

    def commit_offsets(self, group: str, offsets: Sequence[dict], *, transaction_app_id: str | None = None,
                       transaction_version: int | None = None, generation_id: int | None = None) -> dict:
        """:meth:`GroupsClient.commit_offsets <lakelog.client.groups.GroupsClient.commit_offsets>`."""
        return self.groups.commit_offsets(group, offsets, transaction_app_id=transaction_app_id,
                                          transaction_version=transaction_version, generation_id=generation_id)

    def committed_offsets(self, group: str, topic: str | None = None) -> list[dict]:
        """:meth:`GroupsClient.committed_offsets <lakelog.client.groups.GroupsClient.committed_offsets>`."""
        return self.groups.committed_offsets(group, topic)


#: ``table`` as an Arrow IPC stream body (the same encoder the gateway uses).
arrow_body = arrow_ipc
