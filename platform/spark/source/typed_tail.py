"""The typed value of records read through the partition leader: ``valueFormat=schema`` past the lake end offset.

The broker's flusher writes a schema'd topic's ``value_parsed`` column when it commits records to the Delta
table (:mod:`lakelog.schemas.record_columns`). The records of a range that come from the leader's Arrow
fetch instead (those past the lake end offset with ``lakelog.read.tail=true``, a stream's default, and
whole ranges read through the leader: ``lakelog.read.mode=broker``, or ``auto`` where the table cannot be
opened) are bytes; an executor decodes them the same way, so a typed read is as fresh as a bytes read:

1. the topic's value subject (:func:`~lakelog.spark.source.subjects.value_subject`), read once per task;
2. the subject's versions, soft-deleted ones too, and those of the subjects they reference, folded into a
   :class:`~lakelog.schemas.registry_state.RegistryView` from the registry's REST API (any broker answers
   Confluent's ``GET /subjects/{subject}/versions``), kept per Python worker;
3. :class:`~lakelog.schemas.record_columns.RegistryColumns` decodes each record with its writer's schema
   (the version its schema id names), as the flusher does: bytes that are not Confluent's wire format, an
   id that is not a version of the subject, or bytes that do not decode give null;
4. a batch naming a schema id the view does not hold reads the subject again first (a version registered
   since); an id still missing after that is not looked for again for :data:`VIEW_REFRESH_INTERVAL_S`
   (framed bytes of no version must not make every batch read the registry), and reads null meanwhile.

The column then takes the read's type (the union of the tables' ``value_parsed`` columns or the subject's
latest schema's, fixed at planning) in :func:`~lakelog.spark.source.read._kafka_rows`: Arrow casts structs by
field name, a field the read's type lacks is dropped and one it adds is null.
"""

from __future__ import annotations

import logging
import threading
import time
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from lakelog.client import GatewayError, LakelogClient
from lakelog.schemas.record_columns import RegistryColumns
from lakelog.schemas.registry_state import RegistryView, schema_record, version_from_dict
from lakelog.schemas.validation import wire_format_failures
from lakelog.spark.source.subjects import MAX_REFERENCE_DEPTH, value_subject

log = logging.getLogger(__name__)

__all__ = ["VIEW_REFRESH_INTERVAL_S", "SubjectValues", "subject_view", "typed_tail_values"]

#: Seconds a schema id that no version of the subject had at the last read is not looked for again.
VIEW_REFRESH_INTERVAL_S = 1.0


def _get(client: LakelogClient, path: str, **params: str) -> object | None:
    """The JSON answer of a registry GET; None on 404 (Confluent's 40401 / 40402: no such subject or version)."""
    try:
        return client.request("GET", path, params=params or None).json()
    except GatewayError as e:
        if getattr(e, "http_status", None) == 404:
            return None
        raise


def subject_view(client: LakelogClient, subject: str) -> RegistryView:
    """A registry view holding every version of ``subject`` (soft-deleted ones marked so) and of the
    subjects its versions reference, transitively, read through the registry's REST API.

    Raises:
        GatewayError: the registry refused a read (e.g. 403: no READ on the subject).
        ConnectionError: no gateway answered.
    """
    view = RegistryView()
    pending: list[tuple[str, int]] = [(subject, 0)]
    seen: set[str] = set()
    while pending:
        name, depth = pending.pop()
        if name in seen or depth > MAX_REFERENCE_DEPTH:
            continue
        seen.add(name)
        quoted = quote(name, safe="")
        every = _get(client, f"/subjects/{quoted}/versions", deleted="true") or []
        live = set(_get(client, f"/subjects/{quoted}/versions") or [])
        for number in every:
            answer = _get(client, f"/subjects/{quoted}/versions/{int(number)}", deleted="true")
            if not isinstance(answer, dict):
                continue  # permanently deleted between the two reads
            version = version_from_dict({**answer, "deleted": number not in live})
            view.apply(*schema_record(version))
            pending.extend((r.subject, depth + 1) for r in version.references)
    return view


class SubjectValues:
    """Typed values of one subject, decoded on an executor (steps 2-4 of the module docstring).

    Args:
        subject: the registry subject of the topic's values.
        read_view: ``client -> RegistryView`` of the subject (:func:`subject_view`; a test may give another).
    """

    def __init__(self, subject: str, *, read_view=subject_view) -> None:
        self.subject = subject
        self._read_view = read_view
        self._view: RegistryView | None = None
        self._missing: dict[int, float] = {}  # schema id -> when a read of the subject found no version with it
        self._lock = threading.Lock()
        self._columns = RegistryColumns(lambda: self._view or RegistryView())

    def _known_ids(self) -> set[int]:
        view = self._view or RegistryView()
        return {v.schema_id for v in view.versions(self.subject, deleted=True)}

    def __call__(self, client: LakelogClient, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The typed column of ``values`` (framed bytes), one value per record: an array of the subject's
        latest schema's column type, or of type null when the subject has no version.

        Raises:
            GatewayError, ConnectionError: the registry could not be read.
        """
        with self._lock:
            _, _, ids = wire_format_failures(values)
            unknown = set(np.unique(ids).tolist()) - self._known_ids()
            now = time.monotonic()
            if self._view is None or any(now - self._missing.get(i, float("-inf")) >= VIEW_REFRESH_INTERVAL_S
                                         for i in unknown):
                self._view = self._read_view(client, self.subject)
                self._missing.update((i, now) for i in unknown - self._known_ids())
            column = self._columns(subject=self.subject, data=values)
        return pa.nulls(len(values)) if column is None else column


_by_subject: dict[tuple[str, str], SubjectValues] = {}  # (bootstrap servers, subject) -> decoder, per worker
_by_subject_lock = threading.Lock()


def typed_tail_values(client: LakelogClient, *, bootstrap_servers: str, topic: str):
    """``values -> typed column`` for ``topic``'s records fetched from its leader (see the module
    docstring): a :class:`SubjectValues` of the topic's value subject, shared by the tasks of this Python
    worker; every value null when the topic binds no subject.

    Raises:
        GatewayError: the topic's configs could not be read (other than 403), e.g. it was deleted.
    """
    subject = value_subject(client, topic)
    if subject is None:
        return lambda values: pa.nulls(len(values))
    with _by_subject_lock:
        decoder = _by_subject.get((bootstrap_servers, subject))
        if decoder is None:
            decoder = _by_subject[(bootstrap_servers, subject)] = SubjectValues(subject)
    return lambda values: decoder(client, values)
