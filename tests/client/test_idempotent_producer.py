"""The idempotent producer's client logic without a broker: a scripted transport answers each try.

What a real broker does with the headers is tested in tests/producers/; here: one producer id, the
sequences, which failures are retried (always with the same sequence), the backoff, the in-flight
window and the delivery timeout.
"""

from __future__ import annotations

import threading
import time

import httpx
import orjson
import pytest

from lakelog.producers.errors import OutOfOrderSequenceError, UnknownProducerIdError  # registers 40916/40917
from lakelog.protocol.errors import RemoteError
from lakelog.client.idempotent_producer import (
    DeliveryTimeoutError,
    IdempotentProducer,
    exponential_backoff_ms,
    has_retriable_record_errors,
)
from lakelog.protocol.producer_headers import producer_batch_from_headers

OK = {"offsets": [{"partition": 0, "offset": 7, "error_code": None, "error": None}],
      "key_schema_id": None, "value_schema_id": None}


def _answer(status: int, body: dict, *, retriable: bool | None = None) -> httpx.Response:
    headers = {} if retriable is None else {"X-Lakelog-Retriable": "true" if retriable else "false"}
    return httpx.Response(status, content=orjson.dumps(body), headers=headers)


class Script:
    """A :class:`ProducerTransport` whose tries answer from a script: an ``httpx.Response``, an exception
    to raise, or a callable of the try's headers. Records every try."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.tries: list[dict] = []
        self.inits = 0
        self.servers = 0
        self.lock = threading.Lock()

    def init_producer_id(self) -> dict:
        with self.lock:
            self.inits += 1
            return {"producer_id": 100 + self.inits, "producer_epoch": 0}

    def send_once(self, method: str, path: str, *, timeout_s: float, **kwargs) -> httpx.Response:
        with self.lock:
            self.tries.append(dict(kwargs["headers"]))
            answer = self.answers.pop(0) if self.answers else _answer(200, OK)
        if callable(answer):
            answer = answer(kwargs["headers"])
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def next_server(self) -> None:
        self.servers += 1

    def batches(self):
        return [producer_batch_from_headers(h) for h in self.tries]


def _producer(script: Script, **kwargs) -> IdempotentProducer:
    kwargs = {"retry_backoff_ms": 1, "retry_backoff_max_ms": 5, **kwargs}
    return IdempotentProducer(script, **kwargs)


def _send(producer: IdempotentProducer) -> httpx.Response:
    return producer.send("POST", "/topics/t", content=b"{}", headers={"Content-Type": "x"})


def test_one_producer_id_and_increasing_sequences():
    script = Script()
    producer = _producer(script)
    assert producer.producer_id is None and script.inits == 0  # lazily: nothing asked before a produce
    for _ in range(3):
        assert _send(producer).json() == OK
    assert script.inits == 1
    assert [(b.producer_id, b.producer_epoch, b.sequence) for b in script.batches()] == [(101, 0, 0), (101, 0, 1),
                                                                                          (101, 0, 2)]
    assert all(h["Content-Type"] == "x" for h in script.tries)
    assert producer.producer_id == 101 and producer.producer_epoch == 0 and producer.next_sequence == 3


def test_threads_share_one_producer_id():
    script = Script()
    producer = _producer(script)
    threads = [threading.Thread(target=lambda: [_send(producer) for _ in range(10)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert script.inits == 1
    assert sorted(b.sequence for b in script.batches()) == list(range(40))


@pytest.mark.parametrize("failure", [
    httpx.ConnectError("refused"),
    httpx.ReadTimeout("no answer"),
    httpx.RemoteProtocolError("dropped"),
    _answer(503, {"error_code": 50310, "message": "not enough replicas"}, retriable=True),
    _answer(421, {"error_code": 42101, "message": "not the leader", "leader_id": 1, "leader_url": None}),
    _answer(504, {"error_code": 50401, "message": "timed out waiting for the ISR"}),
    _answer(200, {"offsets": [{"partition": 0, "offset": 3, "error_code": None, "error": None},
                              {"partition": 1, "offset": None, "error_code": 2, "error": "not the leader"}]}),
], ids=["connect", "read-timeout", "dropped", "503", "421", "504", "partial-200"])
def test_retriable_failures_are_retried_with_the_same_sequence(failure):
    script = Script(failure, failure)
    producer = _producer(script)
    assert _send(producer).json() == OK
    assert [b.sequence for b in script.batches()] == [0, 0, 0]
    assert script.tries[0] == script.tries[1] == script.tries[2]
    assert script.servers == (2 if isinstance(failure, httpx.TransportError) else 0)  # next server on no answer
    _send(producer)
    assert script.batches()[-1].sequence == 1


def test_non_retriable_errors_raise_at_once():
    script = Script(_answer(404, {"error_code": 40401, "message": "Topic 't' not found."}, retriable=False))
    producer = _producer(script)
    with pytest.raises(RemoteError) as e:
        _send(producer)
    assert e.value.error_code == 40401 and len(script.tries) == 1
    _send(producer)
    assert [b.sequence for b in script.batches()] == [0, 1] and script.inits == 1  # same producer id


def test_a_partial_failure_without_retriable_entries_is_answered():
    body = {"offsets": [{"partition": 0, "offset": 3, "error_code": None, "error": None},
                        {"partition": 1, "offset": None, "error_code": 1, "error": "record too large"}]}
    script = Script(_answer(200, body))
    assert _send(_producer(script)).json() == body and len(script.tries) == 1


@pytest.mark.parametrize("code, cls", [(40916, OutOfOrderSequenceError), (40917, UnknownProducerIdError)])
def test_a_forgotten_producer_takes_a_new_producer_id(code, cls):
    script = Script(_answer(409, {"error_code": code, "message": "refused"}, retriable=False))
    producer = _producer(script)
    with pytest.raises(cls):
        _send(producer)
    assert producer.producer_id is None
    _send(producer)
    assert [(b.producer_id, b.sequence) for b in script.batches()] == [(101, 0), (102, 0)]


def test_fenced_keeps_the_producer_id():
    script = Script(_answer(409, {"error_code": 40915, "message": "fenced"}, retriable=False))
    producer = _producer(script)
    with pytest.raises(RemoteError):
        _send(producer)
    assert producer.producer_id == 101


def test_delivery_timeout_raises_the_last_error():
    script = Script(*[httpx.ConnectError("refused")] * 1000)
    producer = _producer(script, delivery_timeout_ms=300, retry_backoff_ms=10, retry_backoff_max_ms=40)
    started = time.monotonic()
    with pytest.raises(DeliveryTimeoutError) as e:
        _send(producer)
    elapsed = time.monotonic() - started
    assert 0.2 < elapsed < 1.0
    assert isinstance(e.value, ConnectionError) and isinstance(e.value.__cause__, httpx.ConnectError)
    assert 4 <= len(script.tries) <= 30 and {b.sequence for b in script.batches()} == {0}

    busy = _answer(503, {"error_code": 50304, "message": "ZooKeeper away"}, retriable=True)
    script = Script(*[busy] * 1000)
    with pytest.raises(RemoteError) as e:
        _send(_producer(script, delivery_timeout_ms=200))
    assert e.value.error_code == 50304


def test_retry_after_is_honoured():
    full = _answer(429, {"error_code": 42901, "message": "queued.max.request.bytes"}, retriable=True)
    full.headers["Retry-After"] = "0.3"
    script = Script(full)
    started = time.monotonic()
    _send(_producer(script))
    assert time.monotonic() - started >= 0.3 and len(script.tries) == 2


def test_at_most_five_sequences_in_flight():
    """Sequence n starts only once every sequence up to n - 5 is done (a partition remembers 5)."""
    release = threading.Event()
    started: list[int] = []

    def hold_first(headers):
        started.append(int(headers["X-Lakelog-Sequence"]))
        if headers["X-Lakelog-Sequence"] == "0":
            release.wait(10)
        return _answer(200, OK)

    script = Script(*[hold_first] * 8)
    producer = _producer(script)
    threads = [threading.Thread(target=_send, args=(producer,)) for _ in range(8)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    time.sleep(0.2)
    assert sorted(started) == [0, 1, 2, 3, 4]  # 5..7 wait for 0
    release.set()
    for t in threads:
        t.join(timeout=10)
    assert sorted(started) == list(range(8))


def test_backoff_grows_to_its_max():
    waits = [exponential_backoff_ms(a, initial_ms=100, max_ms=1000) for a in range(8)]
    assert all(100 <= w <= 1000 for w in waits)
    assert 80 * 2 <= waits[1] <= 120 * 2 and waits[-1] >= 800
    assert exponential_backoff_ms(0, initial_ms=0, max_ms=0) == 0


def test_settings_are_checked():
    with pytest.raises(ValueError):
        IdempotentProducer(Script(), delivery_timeout_ms=0)
    with pytest.raises(ValueError):
        IdempotentProducer(Script(), retry_backoff_ms=500, retry_backoff_max_ms=100)
    with pytest.raises(ValueError):
        IdempotentProducer(Script(), max_in_flight_requests=6)


def test_retriable_record_errors_are_found():
    assert not has_retriable_record_errors(_answer(200, OK))
    assert has_retriable_record_errors(httpx.Response(200, content=b'{"offsets": [{"error_code": 2}]}'))
    assert not has_retriable_record_errors(httpx.Response(200, content=b'{"partition":0,"base_offset":5}'))
