"""The registry subject bound to a topic's values, and its latest schema, as the source and the sink see them.

A topic's value subject is its ``value.schema.subject`` config, or ``<topic>-value`` (Confluent's
TopicNameStrategy) when ``confluent.value.schema.validation`` is true or the caller may not describe the
topic's configs (:func:`value_subject`). :func:`latest_schema` reads the subject's latest version and the
schemas it references (dependencies first) through the registry's REST API (Confluent's
``GET /subjects/{subject}/versions/latest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from lakelog.client import GatewayError, LakelogClient
from lakelog.spark.errors import SourceError

__all__ = ["SubjectSchema", "latest_schema", "value_subject"]

#: How deep schema references may nest before the sink gives up (a cycle, or a registry answering nonsense).
MAX_REFERENCE_DEPTH = 32


@dataclass(frozen=True)
class SubjectSchema:
    """One registered schema: its subject, version, id, type (``AVRO`` | ``JSON`` | ``PROTOBUF``), text and
    the ``(reference name, schema text)`` of what it references, dependencies first."""

    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    referenced: tuple[tuple[str, str], ...] = ()


def value_subject(client: LakelogClient, topic: str) -> str | None:
    """The subject of ``topic``'s values: ``value.schema.subject``, or ``<topic>-value`` with
    ``confluent.value.schema.validation=true`` (or when DescribeConfigs is denied: 403); None when the topic
    binds no subject.

    Raises:
        GatewayError: the topic's configs could not be read (other than 403), e.g. the topic does not exist.
    """
    try:
        configs = client.admin.topic_configs(topic)
    except GatewayError as e:
        if getattr(e, "http_status", None) != 403:
            raise
        configs = {}  # no DescribeConfigs on the topic: Confluent's TopicNameStrategy subject
    named = (configs.get("value.schema.subject") or {}).get("value")
    if named:
        return named
    validated = (configs.get("confluent.value.schema.validation") or {}).get("value") == "true"
    return f"{topic}-value" if not configs or validated else None


def _version(client: LakelogClient, subject: str, version: str) -> dict | None:
    try:
        return client.request("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}").json()
    except GatewayError as e:
        if getattr(e, "http_status", None) == 404:  # Confluent's 40401 / 40402: no such subject or version
            return None
        raise


def latest_schema(client: LakelogClient, subject: str) -> SubjectSchema | None:
    """``subject``'s latest version with its references resolved; None when the subject has no version.

    Raises:
        GatewayError: the registry refused a request (e.g. 403: no READ on the subject).
        SourceError: a reference names a version that does not exist, or references nest deeper than
            :data:`MAX_REFERENCE_DEPTH`.
    """
    latest = _version(client, subject, "latest")
    if latest is None:
        return None
    referenced: list[tuple[str, str]] = []
    seen: set[tuple[str, int]] = set()

    def resolve(references: list[dict], depth: int) -> None:
        for ref in references or ():
            key = (ref["subject"], int(ref["version"]))
            if key in seen:
                continue
            if depth > MAX_REFERENCE_DEPTH:
                raise SourceError(f"Schema references of subject '{subject}' nest deeper than "
                                   f"{MAX_REFERENCE_DEPTH} levels (a cycle?)")
            found = _version(client, ref["subject"], str(ref["version"]))
            if found is None:
                raise SourceError(f"Subject '{subject}' references version {ref['version']} of subject "
                                   f"'{ref['subject']}', which does not exist")
            seen.add(key)
            resolve(found.get("references") or [], depth + 1)  # dependencies first
            referenced.append((ref["name"], found["schema"]))

    resolve(latest.get("references") or [], 0)
    return SubjectSchema(subject=subject, version=int(latest["version"]), schema_id=int(latest["id"]),
                         schema_type=latest.get("schemaType", "AVRO"), schema=latest["schema"],
                         referenced=tuple(referenced))
