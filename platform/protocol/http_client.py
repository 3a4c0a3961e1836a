"""A small synchronous HTTP client of the gateway (httpx), used by the CLI, the demo, the Spark source
(driver and executors), the benchmarks and tests; :mod:`lakelog.client` is its public name.

Produce requests are idempotent by default (Kafka's ``enable.idempotence=true``): a producer id, a
sequence per request and retries with the same sequence (:mod:`lakelog.protocol.idempotent_producer`).

Errors the gateway answers come back as the server's own :class:`~lakelog.errors.LakelogError`
subclass (rebuilt by :func:`~lakelog.protocol.errors.error_from_response`, which knows every class of
:mod:`lakelog.errors`), always also a :class:`GatewayError` carrying the REST Proxy ``error_code``,
the message and the HTTP status. No answer at all (connection refused or dropped, a timeout, a TLS
failure) is the builtin :class:`ConnectionError`, never an httpx error.
"""

from __future__ import annotations

import base64
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import httpx
import orjson
import pyarrow as pa

from lakelog.protocol import media_types
from lakelog.protocol.arrow_ipc import arrow_ipc
from lakelog.protocol.client_auth import ClientAuth, http_auth
from lakelog.protocol.client_id import CLIENT_ID_HEADER
from lakelog.protocol.errors import RemoteError, error_from_response
from lakelog.protocol.fetch_requests import FetchRequests, IsolationLevel
from lakelog.protocol.group_offset_requests import GroupOffsetRequests
from lakelog.protocol.idempotent_producer import IdempotentProducer
from lakelog.protocol.security_requests import SecurityRequests
from lakelog.protocol.tls import client_ssl_context, describe_tls_failure, disconnect_hint, uses_tls
from lakelog.protocol.transaction_requests import TransactionRequests


#: What every method raises when the gateway answers an error: the server's own error class where the
#: code is known (``UnknownTopicError``, ``NotLeaderError``, ...), always also a :class:`GatewayError`.
GatewayError = RemoteError


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


class LakelogClient(FetchRequests, TransactionRequests, SecurityRequests, GroupOffsetRequests):
    """Synchronous client of one or more gateways; an idempotent producer by default. Producer ids and
    transactions: the methods of :class:`~lakelog.protocol.transaction_requests.TransactionRequests`; fetch:
    those of :class:`~lakelog.protocol.fetch_requests.FetchRequests`; ACLs and users: those of
    :class:`~lakelog.protocol.security_requests.SecurityRequests`.

    Args:
        bootstrap_servers: ``"host:port[,host:port]"`` or URLs; the first that answers is used.
        timeout_s: per-request timeout in seconds. Default: 60.
        enable_idempotence: Kafka's ``enable.idempotence``: every produce request carries a producer id
            (asked of the gateway on the first produce) and the next sequence, and is retried with the same
            sequence on retriable failures, so a retry writes nothing twice
            (:mod:`lakelog.protocol.idempotent_producer`). False: no producer headers, one try per
            bootstrap server on connection errors, as REST Proxy clients. Default: True.
        delivery_timeout_ms: ``delivery.timeout.ms``: how long an idempotent produce request is retried,
            from its first try. Default: 120000.
        retry_backoff_ms: ``retry.backoff.ms``: the first wait between tries of a produce request; it
            doubles on each retry. Default: 100.
        retry_backoff_max_ms: ``retry.backoff.max.ms``: the longest wait between tries. Default: 1000.
        auth: credentials sent with every request (:mod:`~lakelog.protocol.client_auth`): ``(user, password)``
            as HTTP Basic (``authentication.methods`` with ``basic``), a bearer token (``str`` or
            :class:`~lakelog.protocol.client_auth.BearerToken`, ``oauthbearer``) or any ``httpx.Auth``.
            Default: None.
        client_id: Kafka's ``client.id``, sent with every request (``X-Lakelog-Client-Id``) for the brokers'
            client quotas. Default: None (no header: the empty client id).
        ssl_cafile: ``ssl.cafile``: PEM CA certificate(s) the gateway's certificate is verified against
            (:mod:`lakelog.protocol.tls`); with any ``ssl_*`` file, ``host:port`` means ``https://host:port``.
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
        #: the producer id, sequences and retries of produce requests (None with enable_idempotence=False)
        self.producer: IdempotentProducer | None = IdempotentProducer(
            self, delivery_timeout_ms=delivery_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms) if enable_idempotence else None

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "LakelogClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
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
            if not leader_url or self._downgrades(leader_url):
                return resp
            try:
                resp = self.http.request(method, leader_url.rstrip("/") + path, **kwargs)
            except httpx.TransportError:
                return resp
        return resp

    def _downgrades(self, url: str) -> bool:
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

    # -- admin ----------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = self._request("GET", "/v3/clusters").json()["data"][0]["cluster_id"]
        return self._cluster_id

    def list_topics(self) -> list[str]:
        return self._request("GET", "/topics").json()

    def create_topic(self, name: str, *, partitions: int | None = None, replication_factor: int | None = None,
                     configs: dict[str, str] | None = None) -> dict:
        body = {"topic_name": name, "partitions_count": partitions, "replication_factor": replication_factor,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        return self._request("POST", f"/v3/clusters/{self.cluster_id}/topics", json=body).json()

    def delete_topic(self, name: str) -> None:
        self._request("DELETE", f"/v3/clusters/{self.cluster_id}/topics/{name}")

    def describe_topic(self, name: str) -> dict:
        return self._request("GET", f"/topics/{name}").json()

    def topic_configs(self, topic: str) -> dict[str, dict]:
        """Every config of ``topic`` with its effective value (``GET /v3/clusters/{c}/topics/{t}/configs``).

        Returns:
            ``{name: entry}``; each entry is REST Proxy's ``KafkaTopicConfig`` (``value`` a string,
            ``is_default``, ``source``: ``DYNAMIC_TOPIC_CONFIG`` when set on the topic,
            ``STATIC_BROKER_CONFIG`` when the broker's settings give it (``log.retention.ms``, ...), else
            ``DEFAULT_CONFIG``; ``synonyms``, ...).

        Raises:
            GatewayError (UnknownTopicError 40401).
        """
        data = self._request("GET", f"/v3/clusters/{self.cluster_id}/topics/{topic}/configs").json()["data"]
        return {entry["name"]: entry for entry in data}

    def alter_topic_configs(self, topic: str, *, set: dict[str, str] | None = None,
                            delete: Sequence[str] | None = None, validate_only: bool = False) -> None:
        """Set and delete configs of ``topic`` in one all-or-nothing change (``kafka-configs --alter
        --add-config k=v --delete-config k``; ``POST .../configs:alter``). Running brokers apply it without
        a restart; a deleted config goes back to its default (the broker's setting, as ``log.retention.ms``
        for ``retention.ms``, where it has one).

        Args:
            topic: the topic.
            set: Kafka-named configs and their new values (``{"retention.ms": "86400000"}``).
            delete: configs to delete.
            validate_only: check the change, write nothing.

        Raises:
            GatewayError: UnknownTopicError (40401); ConfigError (40003) naming an unknown key, an
            invalid value or a key both set and deleted, nothing written.
        """
        body = {"data": [{"name": k, "value": v, "operation": "SET"} for k, v in (set or {}).items()]
                + [{"name": k, "operation": "DELETE"} for k in (delete or [])], "validate_only": validate_only}
        self._request("POST", f"/v3/clusters/{self.cluster_id}/topics/{topic}/configs:alter", json=body)

    def add_partitions(self, topic: str, *, partitions_count: int) -> dict:
        """Grow ``topic`` to ``partitions_count`` partitions in total (``kafka-topics --alter --partitions``;
        ``PATCH /v3/clusters/{c}/topics/{t}``). The new partitions get leaders and take records at once;
        keyed records may map to other partitions from then on (murmur2 over the new count).

        Returns:
            The topic, REST Proxy's ``KafkaTopic`` (``partitions_count``, ``replication_factor``, ...).

        Raises:
            GatewayError: InvalidPartitionsError (40005) when ``partitions_count`` is not above the
            current count; UnknownTopicError (40401); InvalidReplicationFactorError (40006).
        """
        return self._request("PATCH", f"/v3/clusters/{self.cluster_id}/topics/{topic}",
                             json={"partitions_count": partitions_count}).json()

    def partition_offsets(self, topic: str, partition: int, *, timestamp_ms: int | None = None) -> dict:
        """``{"beginning_offset", "end_offset", "last_stable_offset"}`` (log start offset, high watermark, the
        first offset of an open transaction, at most the HW: read_committed's end) of a partition, plus
        ``offset_for_timestamp`` with ``timestamp_ms``: the first offset whose record timestamp is at or
        after it (ms since the epoch), the high watermark when none is (Kafka's ListOffsets by timestamp).

        Raises: UnknownTopicError (40401), UnknownPartitionError, LeaderNotAvailableError (retriable)."""
        params = {} if timestamp_ms is None else {"timestamp_ms": timestamp_ms}
        return self._request("GET", f"/topics/{topic}/partitions/{partition}/offsets", params=params).json()

    def topic_logs(self, topic: str) -> list[dict]:
        return self._request("GET", f"/lakelog/v1/topics/{topic}/logs").json()

    # -- produce --------------------------------------------------------------------------------
    # init_producer_id: see TransactionRequests. Each produce method sends one request; with enable_idempotence it carries the producer headers
    # and is retried with the same sequence (see _produce). Errors: GatewayError (the server's class,
    # e.g. UnknownTopicError 40401, OutOfOrderSequenceError 40916), ConnectionError.

    def _produce(self, path: str, body: bytes, content_type: str) -> httpx.Response:
        """POST a produce body: idempotently (producer headers, retries with the same sequence) when
        enabled, else once per bootstrap server on connection errors."""
        headers = {"Content-Type": content_type}
        if self.producer is None:
            return self._request("POST", path, content=body, headers=headers)
        return self.producer.send("POST", path, content=body, headers=headers)

    def produce_json(self, topic: str, records: Iterable[dict], *, partition: int | None = None) -> dict:
        """POST JSON-format records (``{"key": ..., "value": ...}``); returns the REST Proxy response."""
        path = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
        body = orjson.dumps({"records": list(records)})
        return self._produce(path, body, media_types.JSON_V2).json()

    def produce_raw_json(self, topic: str, body: bytes, *, partition: int | None = None) -> dict:
        """POST an already encoded JSON-format body."""
        path = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
        return self._produce(path, body, media_types.JSON_V2).json()

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

    def create_consumer(self, group: str, *, name: str | None = None, format: str = "binary",
                        auto_offset_reset: str = "latest", auto_commit: bool = True, assignor: str | None = None,
                        request_timeout_ms: int | None = None,
                        isolation_level: IsolationLevel | None = None) -> "HttpConsumer":
        """Create a REST Proxy v2 consumer instance in ``group`` (``POST /consumers/{group}``); its
        ``isolation.level`` is ``isolation_level`` (None: the default, read_uncommitted, as Kafka's).

        Returns an :class:`HttpConsumer` talking to the instance's ``base_uri`` (the broker that holds it).
        Raises :class:`GatewayError` (40902 when the name is taken, 42204 for a bad config).
        """
        body: dict[str, Any] = {"format": format, "auto.offset.reset": auto_offset_reset,
                                "auto.commit.enable": "true" if auto_commit else "false"}
        if name is not None:
            body["name"] = name
        if assignor is not None:
            body["partition.assignment.strategy"] = assignor
        if request_timeout_ms is not None:
            body["consumer.request.timeout.ms"] = request_timeout_ms
        if isolation_level is not None:
            body["isolation.level"] = isolation_level
        data = self._request("POST", f"/consumers/{group}", content=orjson.dumps(body),
                             headers={"Content-Type": media_types.V2}).json()
        if self._downgrades(data["base_uri"]):
            raise ConnectionError(f"the consumer instance lives at {data['base_uri']}, plain HTTP, but this client "
                                  "talks HTTPS: give every broker TLS (ssl.certfile) before sending credentials there")
        return HttpConsumer(data["base_uri"], group=group, instance_id=data["instance_id"], format=format,
                            timeout_s=self.http.timeout.read or 60.0, auth=self.auth, client_id=self.client_id,
                            verify=self.verify)


def answered(send: Callable[[], httpx.Response], *, timeout_s: float) -> httpx.Response:
    """``send()``'s answer; a 429 (a client quota, 42902, or the broker's produce bytes in flight, 42901) is
    sent again after its ``Retry-After`` while that stays within ``timeout_s`` of the first try.

    Raises:
        GatewayError: the final answer is an error (:func:`~lakelog.protocol.errors.error_from_response`).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        resp = send()
        wait_s = throttled_for_s(resp)
        if wait_s is None or time.monotonic() + wait_s > deadline:
            break
        time.sleep(wait_s)
    if resp.status_code >= 400:
        raise error_from_response(resp)
    return resp


def throttled_for_s(resp: httpx.Response) -> float | None:
    """Seconds to wait before sending a request again that was answered 429 with ``Retry-After`` (a client
    quota, 42902, or the broker's produce bytes in flight, 42901); None for any other answer. At least 10 ms."""
    if resp.status_code != 429:
        return None
    try:
        return max(float(resp.headers.get("Retry-After", "1")), 0.01)
    except ValueError:
        return 1.0


class HttpConsumer:
    """A REST Proxy v2 consumer instance seen from the client (like a ``KafkaConsumer`` over HTTP).

    Made by :meth:`LakelogClient.create_consumer`. Methods raise :class:`GatewayError` with REST Proxy's
    codes (40403 unknown instance, 40601 format mismatch, 40901/40903 subscription conflicts, 40904
    commit from a stale generation). Use as a context manager to delete the instance at the end.
    """

    def __init__(self, base_uri: str, *, group: str, instance_id: str, format: str = "binary",
                 timeout_s: float = 60.0, auth: httpx.Auth | None = None, client_id: str | None = None,
                 verify: ssl.SSLContext | bool = True) -> None:
        self.base_uri = base_uri.rstrip("/")
        self.group = group
        self.instance_id = instance_id
        self.format = format
        self.timeout_s = timeout_s
        self.http = httpx.Client(timeout=timeout_s, auth=auth, verify=verify,
                                 headers={CLIENT_ID_HEADER: client_id} if client_id else {})
        self.closed = False
        self.last_generation: int | None = None

    def _call(self, method: str, path: str = "", *, body: Any = None, **kwargs: Any) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if body is not None:
            kwargs["content"] = orjson.dumps(body)
            headers.setdefault("Content-Type", media_types.V2)

        def send() -> httpx.Response:
            try:
                return self.http.request(method, self.base_uri + path, headers=headers, **kwargs)
            except httpx.TransportError as e:  # as LakelogClient: the builtin ConnectionError, never httpx's
                raise ConnectionError(describe_tls_failure(e, url=self.base_uri) or f"the consumer instance at "
                                      f"{self.base_uri} did not answer: {e}{disconnect_hint(e, url=self.base_uri)}") from e

        return answered(send, timeout_s=self.timeout_s)

    def subscribe(self, topics: Sequence[str] | None = None, *, pattern: str | None = None) -> None:
        """Subscribe to ``topics`` or to the topics matching the regex ``pattern`` (now and later)."""
        self._call("POST", "/subscription", body={"topics": list(topics)} if pattern is None else {"topic_pattern": pattern})

    def subscription(self) -> list[str]:
        return self._call("GET", "/subscription").json()["topics"]

    def unsubscribe(self) -> None:
        self._call("DELETE", "/subscription")

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Manual assignment of ``[(topic, partition)]``."""
        self._call("POST", "/assignments", body={"partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    def assignment(self) -> list[tuple[str, int]]:
        """The partitions the instance reads now (empty until its group's rebalance completes)."""
        return [(p["topic"], p["partition"]) for p in self._call("GET", "/assignments").json()["partitions"]]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._call("POST", "/positions", body={"offsets": [{"topic": topic, "partition": partition, "offset": offset}]})

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._call("POST", "/positions/beginning", body={"partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    def seek_to_end(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._call("POST", "/positions/end", body={"partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    def poll(self, *, timeout_ms: int = 1000, max_bytes: int | None = None) -> list[dict]:
        """``GET .../records``: REST Proxy records ``{"topic", "key", "value", "partition", "offset", ...}``
        (binary format: base64 keys and values). ``last_generation`` is then the group generation
        they were read in (None outside group membership)."""
        params: dict[str, int] = {"timeout": timeout_ms}
        if max_bytes is not None:
            params["max_bytes"] = max_bytes
        accept = media_types.BINARY_V2 if self.format == "binary" else media_types.JSON_V2
        resp = self._call("GET", "/records", params=params, headers={"Accept": accept})
        generation = resp.headers.get("X-Lakelog-Generation")
        self.last_generation = int(generation) if generation is not None else None
        return orjson.loads(resp.content)

    def commit(self, offsets: Sequence[dict] | None = None) -> None:
        """Commit ``[{"topic", "partition", "offset"}]`` (offset = last record processed), or with None
        every record fetched so far."""
        self._call("POST", "/offsets", body={"offsets": list(offsets)} if offsets else None)

    def committed(self, partitions: Iterable[tuple[str, int]]) -> list[dict]:
        """The group's committed offsets (the next offset to read) of ``partitions``."""
        body = {"partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        return self._call("GET", "/offsets", body=body).json()["offsets"]

    def close(self) -> None:
        """Delete the instance (``DELETE``; with auto commit its positions are committed first)."""
        if not self.closed:
            self.closed = True
            try:
                self._call("DELETE")
            except GatewayError as e:
                if e.error_code != 40403:  # already gone (expired): nothing to delete
                    raise
            finally:
                self.http.close()

    def __enter__(self) -> "HttpConsumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()




#: ``table`` as an Arrow IPC stream body (the same encoder the gateway uses).
arrow_body = arrow_ipc
