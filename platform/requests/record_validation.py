"""Schema validation at produce, and the dead-letter topic of the records it refuses.

Step 1b of :meth:`ProduceOperation.produce <lakelog.requests.produce.ProduceOperation.produce>`, so every
front door (REST v2 and v3 in every embedded format, the Kafka listener) meets the same rule once. A topic
whose value subject (:meth:`TopicConfig.value_subject <lakelog.config.TopicConfig.value_subject>`) or key
subject is set takes a record only when :class:`~lakelog.schemas.validation.SubjectValidator` passes its
value and key (Confluent Server's ``confluent.value.schema.validation``; lakelog also decodes the payload).

What happens to the records that fail depends on the topic's ``errors.tolerance`` (Kafka Connect's name):

- ``none`` (the default): the whole request is refused, nothing written:
  :class:`~lakelog.errors.schemas.RecordValidationError` (422 / 42230; Kafka: INVALID_RECORD with
  ``record_errors``) naming the first failing record's index and why;
- ``all`` with ``errors.deadletterqueue.topic.name``: the failing records are produced to that topic first
  (:func:`dead_letter_batch`: their key, value, timestamp and headers, plus Kafka Connect's
  ``__connect.errors.*`` headers saying why), then the others to the topic. When the dead-letter write fails
  the request fails and nothing of it is in the topic; when the topic's write fails after it, the records
  are in the dead-letter topic and a retry of the request writes them there again (it may duplicate
  dead letters, never records of the topic). An idempotent or transactional request is refused as with
  ``none``: its sequence numbers cover every record it holds, so it cannot be split between two topics.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pyarrow as pa

from lakelog.errors.schemas import RecordValidationError
from lakelog.log_tables.records import PRODUCE_SCHEMA
from lakelog.replication.metadata import TopicMetadata
from lakelog.schemas.registry import SchemaRegistry
from lakelog.schemas.validation import RecordField, SubjectValidator

__all__ = ["DeadLetter", "RecordFailure", "RecordValidation", "dead_letter_batch", "refusal"]

#: Kafka Connect's ``DeadLetterQueueReporter`` header names, as lakelog fills them
ERROR_HEADER_TOPIC = "__connect.errors.topic"
ERROR_HEADER_STAGE = "__connect.errors.stage"
ERROR_HEADER_EXCEPTION = "__connect.errors.exception.class.name"
ERROR_HEADER_EXCEPTION_MESSAGE = "__connect.errors.exception.message"
#: How long a record whose schema id is not (yet) a version of its subject waits for this broker's registry
#: view to read it (a schema registered through another broker is read within milliseconds) before it is
#: refused.
UNKNOWN_SCHEMA_ID_WAIT_MS = 1_000
#: Kafka Connect's ``Stage`` of a key or value that did not convert
_STAGES = {"key": "KEY_CONVERTER", "value": "VALUE_CONVERTER"}


@dataclass(frozen=True)
class RecordFailure:
    """Why schema validation refused one record: which part failed (``key`` or ``value``) and why (to follow
    "its value ..."). ``str()`` is the sentence a refusal or a dead letter's header says."""

    field: RecordField
    reason: str

    def __str__(self) -> str:
        return f"its {self.field} {self.reason}"


@dataclass(frozen=True)
class DeadLetter:
    """Where a record refused by schema validation went instead of its topic.

    Attributes:
        topic: the dead-letter topic (``errors.deadletterqueue.topic.name``).
        partition, offset: its place there (offset -1 with ``acks=0``).
        reason: why it was refused (the message of its ``__connect.errors.exception.message`` header).
    """

    topic: str
    partition: int
    offset: int
    reason: str

    def message(self, index: int) -> str:
        """What a produce answer says of record ``index`` sent here."""
        return (f"Record {index} was written to the dead-letter topic '{self.topic}' (partition {self.partition}, "
                f"offset {self.offset}) instead: {self.reason}.")


class RecordValidation:
    """The schema validation of produced records on one broker: one :class:`SubjectValidator` per subject
    and field, rebuilt when the subject's versions change.

    Args:
        registry: the broker's schema registry (its view of ``_schemas``).
    """

    def __init__(self, *, registry: SchemaRegistry) -> None:
        self.registry = registry
        self._validators: dict[tuple[str, RecordField], SubjectValidator] = {}

    def validators(self, meta: TopicMetadata) -> list[SubjectValidator]:
        """The validators of ``meta``'s key and value subjects (empty: the topic is not validated)."""
        out = []
        for field, subject in (("key", meta.config.key_subject(meta.name)),
                               ("value", meta.config.value_subject(meta.name))):
            if subject is None:
                continue
            view = self.registry.view
            versions = view.versions(subject)
            found = self._validators.get((subject, field))
            if found is None or found.identity != tuple(sorted((v.version, v.schema_id) for v in versions)):
                found = self._validators[(subject, field)] = SubjectValidator(subject, field=field,
                                                                              versions=versions, view=view)
            out.append(found)
        return out

    async def failures(self, meta: TopicMetadata, records: pa.Table) -> dict[int, RecordFailure]:
        """Record index -> why it is refused, for each record of ``records`` (a produce batch) whose key or
        value fails its subject, in index order (the key's failure when both fail; empty: all pass, or the
        topic is not validated). Decoded off the event loop, each column in one pass.

        The registry view must know the schemas first: after the broker starts this waits for the view to
        catch up with ``_schemas``, and a record whose schema id is not (yet) a version of its subject
        (registered through another broker a moment ago) is checked again once the view holds it, waiting
        at most :data:`UNKNOWN_SCHEMA_ID_WAIT_MS`.

        Raises:
            SchemaRegistryTimeoutError: 500 / 50002 (retriable; Kafka: REQUEST_TIMED_OUT): the view has not
                caught up with ``_schemas`` since the broker started, within ``request.timeout.ms``.
        """
        if not self.validators(meta) or records.num_rows == 0:
            return {}
        if not self.registry.caught_up:
            await self.registry.wait_caught_up()
        validators = self.validators(meta)
        failures = await asyncio.to_thread(_check, validators, records)
        if failures:
            unknown = {v.subject: ids for v in validators if (ids := v.unknown_ids(records[v.field]))}
            waits = [self.registry.wait_for_schema_ids(subject, ids, timeout_ms=UNKNOWN_SCHEMA_ID_WAIT_MS)
                     for subject, ids in unknown.items()]
            if waits and any(await asyncio.gather(*waits)):
                failures = await asyncio.to_thread(_check, self.validators(meta), records)
        return failures


def _check(validators: list[SubjectValidator], records: pa.Table) -> dict[int, RecordFailure]:
    """:meth:`RecordValidation.failures`' decode (blocking), in index order."""
    out: dict[int, RecordFailure] = {}
    for v in validators:
        for i, reason in v.failures(records[v.field]).items():
            out.setdefault(i, RecordFailure(v.field, reason))
    return dict(sorted(out.items()))


def refusal(topic: str, failures: dict[int, RecordFailure]) -> RecordValidationError:
    """The error refusing a whole request for ``failures`` (record index -> why, in index order)."""
    first, reason = next(iter(failures.items()))
    more = f" ({len(failures) - 1} more record(s) fail too)" if len(failures) > 1 else ""
    return RecordValidationError(
        f"Record {first} is refused by the schema validation of topic '{topic}': {reason}{more}. Nothing was "
        "written; serialize it with a schema of the subject (Confluent's wire format).",
        failures={i: str(f) for i, f in failures.items()})


def dead_letter_batch(topic: str, records: pa.Table, failures: dict[int, RecordFailure]) -> pa.Table:
    """The failing records of ``records`` as a produce batch for the dead-letter topic: key, value and
    timestamp as sent, their headers followed by Kafka Connect's error headers (``__connect.errors.topic``,
    ``.stage`` ``KEY_CONVERTER``/``VALUE_CONVERTER``, ``.exception.class.name``, ``.exception.message``)."""
    take = pa.array(list(failures), pa.int64())
    dead = records.take(take)
    old = dead["headers"].to_pylist()
    headers = []
    for own, failure in zip(old, failures.values()):
        headers.append(list(own or []) + [
            {"key": ERROR_HEADER_TOPIC, "value": topic.encode()},
            {"key": ERROR_HEADER_STAGE, "value": _STAGES[failure.field].encode()},
            {"key": ERROR_HEADER_EXCEPTION, "value": b"lakelog.errors.RecordValidationError"},
            {"key": ERROR_HEADER_EXCEPTION_MESSAGE, "value": str(failure).encode()}])
    return dead.set_column(dead.schema.get_field_index("headers"), "headers",
                           pa.array(headers, PRODUCE_SCHEMA.field("headers").type))
