"""Media types of lakelog's HTTP bodies (Confluent REST Proxy v2 plus Arrow IPC).

- :data:`BINARY_V2` ``application/vnd.kafka.binary.v2+json``: keys, values and header values are
  base64 strings;
- :data:`JSON_V2` ``application/vnd.kafka.json.v2+json`` (and plain :data:`JSON`): keys and values are
  embedded JSON;
- :data:`V2` ``application/vnd.kafka.v2+json``: REST Proxy's metadata and consumer bodies;
- :data:`AVRO_V2`, :data:`JSONSCHEMA_V2`, :data:`PROTOBUF_V2`: REST Proxy's schema'd embedded formats (keys
  and values as JSON, in Confluent's wire format on the log);
- :data:`ARROW_STREAM` ``application/vnd.apache.arrow.stream``: an Arrow IPC stream (bulk produce,
  fetch, replica fetch).
"""

from __future__ import annotations

from typing import Literal

BINARY_V2 = "application/vnd.kafka.binary.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"
AVRO_V2 = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA_V2 = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF_V2 = "application/vnd.kafka.protobuf.v2+json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
JSON = "application/json"

#: The record body forms: base64 JSON, embedded JSON, Arrow IPC.
Format = Literal["binary", "json", "arrow"]


def media_type(header: str | None) -> str:
    """The bare media type of a Content-Type/Accept entry (parameters and case dropped)."""
    return (header or "").split(";", 1)[0].strip().lower()
