"""The client side of the idempotent producer: a producer id, a sequence per produce request, and retries
that repeat the request's sequence (Kafka's ``enable.idempotence=true``, KIP-98; the default since Kafka 3.0).

:class:`IdempotentProducer` is what :class:`~lakelog.client.LakelogClient` does with every
produce request when ``enable_idempotence`` is on (its default):

1. **Producer id.** On the first produce it asks the gateway for a producer id
   (``POST /v3/clusters/{cluster_id}/producers``, Kafka's InitProducerId), once, whatever the number of
   threads that produce through the client.
2. **Sequence.** Each produce request takes the next sequence 0, 1, 2, ... (one per request, shared by
   all the partitions the request touches) and carries the three headers of
   :mod:`lakelog.protocol.producer_headers`.
3. **Retries with the same sequence.** A retriable failure sends the very same request (body and headers)
   again: a connection error or timeout (the next bootstrap server is tried), an error answer that is
   retriable (``X-Lakelog-Retriable: true``, or 421 / 503 / 504 without the header: not the leader, not
   enough replicas, ZooKeeper away, ...; a 429 waits its ``Retry-After``), or a 200 whose per-record
   entries carry REST Proxy's retriable ``error_code`` 2 (a share of the request failed on one
   partition). A partition that already wrote the request answers the original offsets and writes
   nothing. The waits grow exponentially from ``retry.backoff.ms`` to ``retry.backoff.max.ms`` (20%
   jitter, Kafka's ``ExponentialBackoff``), until ``delivery.timeout.ms`` has passed since the request
   was first tried; then the last error is raised (a transport failure as :class:`DeliveryTimeoutError`,
   a ``ConnectionError``). A non-retriable error is raised at once.
4. **In flight.** At most :data:`MAX_IN_FLIGHT_REQUESTS` sequences are outstanding: a request with
   sequence ``n`` starts only when every request up to ``n - 5`` is done, because a partition remembers
   the last 5 requests of a producer (Kafka requires ``max.in.flight.requests.per.connection <= 5`` with
   idempotence for the same reason); so a retry is always recognised.

After a ``40916`` (sequence older than the partition remembers) or ``40917`` (unknown or expired producer
id) the request's error is raised and the next request gets a new producer id (Kafka resets the
producer id on these, KIP-360).

Kafka sources: ``ProducerConfig`` (``enable.idempotence``, ``delivery.timeout.ms``, ``retry.backoff.ms``,
``retry.backoff.max.ms``), ``TransactionManager`` (sequences, producer id resets), ``Sender``
(retries), ``org.apache.kafka.common.utils.ExponentialBackoff``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Protocol

import httpx
import orjson

from lakelog.protocol.errors import RemoteError, error_from_response
from lakelog.protocol.producer_headers import MAX_SEQUENCE, ProducerBatch

log = logging.getLogger(__name__)

__all__ = ["MAX_IN_FLIGHT_REQUESTS", "DeliveryTimeoutError", "IdempotentProducer", "ProducerTransport",
           "exponential_backoff_ms"]

#: Requests of one producer in flight at most: a partition remembers a producer's last 5 requests (Kafka's
#: ``NUM_BATCHES_TO_RETAIN``, the bound on ``max.in.flight.requests.per.connection`` with idempotence).
MAX_IN_FLIGHT_REQUESTS = 5
#: REST Proxy's per-record ``error_code`` in a v2 produce answer for a share that failed retriably.
RETRIABLE_RECORD_ERROR = 2
#: Error codes after which the producer takes a new producer id (OutOfOrderSequenceError,
#: UnknownProducerIdError of :mod:`lakelog.producers.errors`, not importable from this layer).
RESET_PRODUCER_ERROR_CODES = frozenset({40916, 40917})
#: Kafka's ``ExponentialBackoff`` jitter for retries (``CommonClientConfigs.RETRY_BACKOFF_JITTER``).
BACKOFF_JITTER = 0.2


class DeliveryTimeoutError(ConnectionError):
    """A produce request got no answer (connection errors, timeouts) before ``delivery.timeout.ms`` passed:
    it may or may not have been written. The last transport error is its ``__cause__``. A
    ``ConnectionError``, as :class:`~lakelog.client.LakelogClient` raises when no gateway
    answers."""


class ProducerTransport(Protocol):
    """What :class:`IdempotentProducer` needs of its client (:class:`~lakelog.client.LakelogClient`)."""

    def init_producer_id(self) -> dict:
        """``{"producer_id": int, "producer_epoch": int}`` from the gateway. Raises RemoteError, ConnectionError."""
        ...

    def send_once(self, method: str, path: str, *, timeout_s: float, **kwargs) -> httpx.Response:
        """One try at the current server (following a 421 to the leader); the answer, whatever its status.
        Raises httpx.TransportError."""
        ...

    def next_server(self) -> None:
        """Send to the next bootstrap server from now on (after a connection error)."""
        ...


def exponential_backoff_ms(attempt: int, *, initial_ms: int, max_ms: int, jitter: float = BACKOFF_JITTER) -> float:
    """The wait before retry number ``attempt + 1`` (attempt 0 = the first retry), in ms: ``initial_ms * 2**attempt``
    capped at ``max_ms``, times a random factor in ``[1 - jitter, 1 + jitter]``, kept within
    ``[initial_ms, max_ms]`` (Kafka's ``ExponentialBackoff`` with multiplier 2)."""
    term = min(initial_ms * 2.0 ** min(attempt, 62), max_ms)
    return min(max(term * random.uniform(1 - jitter, 1 + jitter), initial_ms), max_ms)


def has_retriable_record_errors(resp: httpx.Response) -> bool:
    """Whether a 200 v2 produce answer (``{"offsets": [{"partition", "offset", "error_code", "error"}]}``)
    has an entry with the retriable ``error_code`` 2. Answers without one are not parsed (a byte search)."""
    content = resp.content
    if b'"error_code":2' not in content and b'"error_code": 2' not in content:
        return False
    try:
        entries = orjson.loads(content).get("offsets") or []
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return any(isinstance(e, dict) and e.get("error_code") == RETRIABLE_RECORD_ERROR for e in entries)


class IdempotentProducer:
    """The producer id, sequences and retries of one client (see the module docstring).

    Args:
        transport: the client that sends (:class:`ProducerTransport`).
        delivery_timeout_ms: ``delivery.timeout.ms``: how long a request is retried, from its first try
            (> 0). Default: 120000.
        retry_backoff_ms: ``retry.backoff.ms``: the first wait between tries (>= 0). Default: 100.
        retry_backoff_max_ms: ``retry.backoff.max.ms``: the longest wait (>= ``retry_backoff_ms``).
            Default: 1000.
        max_in_flight_requests: sequences outstanding at most, 1 to :data:`MAX_IN_FLIGHT_REQUESTS`. Default: 5.

    Thread-safe: threads sharing a client share its producer id and sequence.

    Raises:
        ValueError: a setting out of its range.
    """

    def __init__(self, transport: ProducerTransport, *, delivery_timeout_ms: int = 120_000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000,
                 max_in_flight_requests: int = MAX_IN_FLIGHT_REQUESTS) -> None:
        if delivery_timeout_ms <= 0:
            raise ValueError(f"delivery.timeout.ms must be positive, not {delivery_timeout_ms}")
        if retry_backoff_ms < 0 or retry_backoff_max_ms < retry_backoff_ms:
            raise ValueError(f"need 0 <= retry.backoff.ms ({retry_backoff_ms}) <= retry.backoff.max.ms "
                             f"({retry_backoff_max_ms})")
        if not 1 <= max_in_flight_requests <= MAX_IN_FLIGHT_REQUESTS:
            raise ValueError(f"max in-flight requests must be 1 to {MAX_IN_FLIGHT_REQUESTS} with idempotence, "
                             f"not {max_in_flight_requests}")
        self.transport = transport
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.max_in_flight_requests = max_in_flight_requests
        self._init_lock = threading.Lock()   # one InitProducerId at a time
        self._cond = threading.Condition()   # guards the fields below
        self._producer: tuple[int, int] | None = None  # (producer id, epoch)
        self._next_sequence = 0
        self._in_flight: set[tuple[int, int]] = set()  # (producer id, sequence) of requests not done

    @property
    def producer_id(self) -> int | None:
        """The producer id in use (None before the first produce, or after a reset)."""
        producer = self._producer
        return None if producer is None else producer[0]

    @property
    def producer_epoch(self) -> int | None:
        """Its epoch (None when there is no producer id)."""
        producer = self._producer
        return None if producer is None else producer[1]

    @property
    def next_sequence(self) -> int:
        """The sequence the next request takes."""
        return self._next_sequence

    # -- sending --------------------------------------------------------------------------------

    def send(self, method: str, path: str, *, content: bytes, headers: dict[str, str]) -> httpx.Response:
        """Send one produce request with the next sequence, retrying it with the same sequence.

        Args:
            method, path: the produce route (``POST``, ``/topics/t/partitions/0/records``).
            content: the body, sent unchanged on every try. headers: its other headers (Content-Type).

        Returns:
            The 2xx answer (a 200 whose entries still carry retriable errors once ``delivery.timeout.ms``
            passed is returned as it is: those entries say which records were not written).

        Raises:
            RemoteError: a non-retriable error answer (its own class where known, e.g.
                ``OutOfOrderSequenceError``), at once; or the last retriable one once
                ``delivery.timeout.ms`` passed.
            DeliveryTimeoutError: no answer (connection errors, timeouts) until ``delivery.timeout.ms``.
        """
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        batch = self._begin(deadline)
        try:
            return self._deliver(batch, method, path, content=content, headers={**headers, **batch.headers()},
                                 deadline=deadline)
        finally:
            self._end(batch)

    def _deliver(self, batch: ProducerBatch, method: str, path: str, *, content: bytes, headers: dict[str, str],
                 deadline: float) -> httpx.Response:
        attempt = 0
        while True:
            wait_s = 0.0
            remaining_s = max(deadline - time.monotonic(), 0.001)
            try:
                resp = self.transport.send_once(method, path, content=content, headers=headers, timeout_s=remaining_s)
            except httpx.TransportError as e:
                last: BaseException | httpx.Response = e
                self.transport.next_server()
            else:
                if resp.status_code < 400:
                    if not has_retriable_record_errors(resp):
                        return resp
                    last = resp
                else:
                    err = error_from_response(resp)
                    if not err.retriable:
                        self._refused(batch, err)
                        raise err
                    last = err
                    wait_s = _retry_after_s(resp)
            wait_s = max(wait_s, exponential_backoff_ms(attempt, initial_ms=self.retry_backoff_ms,
                                                        max_ms=self.retry_backoff_max_ms) / 1000)
            attempt += 1
            if time.monotonic() + wait_s >= deadline:
                return self._give_up(batch, last, attempt)
            log.info("produce %s (producer %d, sequence %d) failed on try %d (%s); retrying in %.0f ms", path,
                     batch.producer_id, batch.sequence, attempt, _describe(last), wait_s * 1000)
            time.sleep(wait_s)

    def _give_up(self, batch: ProducerBatch, last: BaseException | httpx.Response, tries: int) -> httpx.Response:
        """Past ``delivery.timeout.ms``: the last answer or error."""
        log.warning("produce (producer %d, sequence %d) given up after %d tries in delivery.timeout.ms=%d: %s",
                    batch.producer_id, batch.sequence, tries, self.delivery_timeout_ms, _describe(last))
        if isinstance(last, httpx.Response):
            return last
        if isinstance(last, RemoteError):
            raise last
        raise DeliveryTimeoutError(
            f"produce request (producer {batch.producer_id}, sequence {batch.sequence}) got no answer in "
            f"delivery.timeout.ms={self.delivery_timeout_ms} ({tries} tries); it may or may not have been "
            f"written. Last error: {_describe(last)}") from last

    # -- producer id and sequences --------------------------------------------------------------

    def _begin(self, deadline: float) -> ProducerBatch:
        """The next request's producer id, epoch and sequence, once the in-flight window has room."""
        while True:
            producer = self._ensure_producer(deadline)
            with self._cond:
                while self._producer == producer and self._window_full(producer[0]):
                    remaining_s = deadline - time.monotonic()
                    if remaining_s <= 0:
                        raise DeliveryTimeoutError(
                            f"delivery.timeout.ms={self.delivery_timeout_ms} passed while "
                            f"{self.max_in_flight_requests} earlier requests of producer {producer[0]} were "
                            "still in flight; nothing was sent.")
                    self._cond.wait(remaining_s)
                if self._producer != producer:
                    continue  # reset meanwhile: a new producer id
                if self._next_sequence > MAX_SEQUENCE:  # 2**31 requests: go on with a new producer id
                    self._producer = None
                    continue
                sequence = self._next_sequence
                self._next_sequence += 1
                self._in_flight.add((producer[0], sequence))
                return ProducerBatch(producer[0], producer[1], sequence)

    def _window_full(self, producer_id: int) -> bool:
        mine = [s for p, s in self._in_flight if p == producer_id]
        return bool(mine) and self._next_sequence - min(mine) >= self.max_in_flight_requests

    def _end(self, batch: ProducerBatch) -> None:
        with self._cond:
            self._in_flight.discard((batch.producer_id, batch.sequence))
            self._cond.notify_all()

    def _refused(self, batch: ProducerBatch, err: RemoteError) -> None:
        """After a non-retriable answer: the next request takes a new producer id when the partition
        forgot or never knew this one (40916, 40917)."""
        if err.error_code in RESET_PRODUCER_ERROR_CODES:
            with self._cond:
                if self._producer is not None and self._producer[0] == batch.producer_id:
                    log.warning("producer %d refused (%s): the next request takes a new producer id",
                                batch.producer_id, err.error_code)
                    self._producer = None
                    self._cond.notify_all()

    def _ensure_producer(self, deadline: float) -> tuple[int, int]:
        """The producer id and epoch, asked of the gateway (once; retriable failures retried until the
        deadline).

        Raises:
            RemoteError: a non-retriable answer, or the last retriable one at the deadline.
            DeliveryTimeoutError: no gateway answered until the deadline.
        """
        producer = self._producer
        if producer is not None:
            return producer
        with self._init_lock:
            attempt = 0
            while (producer := self._producer) is None:
                try:
                    answer = self.transport.init_producer_id()
                except RemoteError as e:
                    if not e.retriable:
                        raise
                    last: Exception = e
                except ConnectionError as e:
                    last = e
                else:
                    producer = (int(answer["producer_id"]), int(answer["producer_epoch"]))
                    with self._cond:
                        self._producer = producer
                        self._next_sequence = 0
                        self._cond.notify_all()
                    log.info("idempotent producer id %d, epoch %d", *producer)
                    return producer
                wait_s = exponential_backoff_ms(attempt, initial_ms=self.retry_backoff_ms,
                                                max_ms=self.retry_backoff_max_ms) / 1000
                attempt += 1
                if time.monotonic() + wait_s >= deadline:
                    if isinstance(last, RemoteError):
                        raise last
                    raise DeliveryTimeoutError(
                        f"no producer id within delivery.timeout.ms={self.delivery_timeout_ms}: {last}") from last
                time.sleep(wait_s)
            return producer


def _retry_after_s(resp: httpx.Response) -> float:
    """The answer's ``Retry-After`` in seconds (0 without one or for a date)."""
    try:
        return max(float(resp.headers.get("Retry-After", 0)), 0.0)
    except ValueError:
        return 0.0


def _describe(failure: BaseException | httpx.Response) -> str:
    if isinstance(failure, httpx.Response):
        return f"HTTP {failure.status_code} with retriable per-record errors"
    return f"{type(failure).__name__}: {failure}"
