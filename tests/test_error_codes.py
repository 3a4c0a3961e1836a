"""Every lakelog error class answers with its own REST error code, and a client rebuilds it."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys

import httpx
import pytest

import lakelog
from lakelog.errors import ERROR_CLASSES, LakelogError, for_code
from lakelog.protocol.errors import RemoteError, error_from_response


def _import_everything() -> None:
    for info in pkgutil.walk_packages(lakelog.__path__, "lakelog."):
        if info.name.endswith(("__main__",)):
            continue
        importlib.import_module(info.name)


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def test_each_error_class_has_a_code_of_its_own():
    _import_everything()
    owners: dict[int, list[str]] = {}
    for cls in _subclasses(LakelogError):
        if issubclass(cls, RemoteError):
            continue  # errors rebuilt on a client carry the server's code
        code = cls.__dict__.get("error_code")
        if isinstance(code, int):
            owners.setdefault(code, []).append(f"{cls.__module__}.{cls.__qualname__}")
            status = cls.__dict__.get("http_status", cls.http_status)
            assert code // 100 == status, f"{cls.__qualname__}: error_code {code} does not start with its status {status}"
    shared = {code: names for code, names in owners.items() if len(names) > 1}
    assert not shared, f"REST error codes used by more than one error class: {shared}"
    assert len(owners) >= 30  # the walk really found the project's errors


def test_registry_names_the_defining_class():
    _import_everything()
    from lakelog.replication.errors import NotLeaderError, UnknownTopicError

    assert ERROR_CLASSES[40401] is UnknownTopicError
    assert ERROR_CLASSES[42101] is NotLeaderError


def _answer(status: int, body: dict | str, retriable: str | None = None) -> httpx.Response:
    headers = {} if retriable is None else {"X-Lakelog-Retriable": retriable}
    if isinstance(body, dict):
        return httpx.Response(status, json=body, headers=headers)
    return httpx.Response(status, text=body, headers=headers)


def test_error_from_response_rebuilds_the_servers_class():
    from lakelog.replication.errors import NotLeaderError, UnknownTopicError

    err = error_from_response(_answer(404, {"error_code": 40401, "message": "Topic 'x' not found."}, "false"))
    assert isinstance(err, UnknownTopicError) and isinstance(err, RemoteError)
    assert err.error_code == 40401 and err.http_status == 404 and not err.retriable
    assert "Topic 'x' not found." in err.message

    err = error_from_response(_answer(421, {"error_code": 42101, "message": "not the leader",
                                            "leader_id": 2, "leader_url": "http://h:2"}, "true"))
    assert isinstance(err, NotLeaderError)
    assert (err.leader_id, err.leader_url, err.retriable) == (2, "http://h:2", True)


@pytest.mark.parametrize("resp, code, retriable", [
    (_answer(502, "<html>bad gateway</html>"), 502, False),
    (_answer(503, "unavailable"), 503, True),
    (_answer(418, {"error_code": 41899, "message": "teapot"}), 41899, False),
])
def test_unknown_answers_are_remote_errors(resp, code, retriable):
    err = error_from_response(resp)
    assert type(err) is RemoteError
    assert err.error_code == code and err.retriable is retriable


# -- the table is complete as soon as lakelog.errors loads ------------------------------------------

#: Run in a fresh Python: prints {code: "module.Class"} of every class that declares a REST code, either
#: after importing only lakelog.errors ("errors") or after importing every module of the package ("all").
_CODES_SCRIPT = """
import importlib, json, pkgutil, sys
import lakelog, lakelog.errors
from lakelog.errors import LakelogError
if sys.argv[1] == "all":
    for info in pkgutil.walk_packages(lakelog.__path__, "lakelog."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
def walk(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from walk(sub)
codes = {}
for cls in walk(LakelogError):
    code = cls.__dict__.get("error_code")
    if isinstance(code, int):
        codes.setdefault(str(code), []).append(f"{cls.__module__}.{cls.__qualname__}")
table = {str(code): f"{cls.__module__}.{cls.__qualname__}" for code, cls in lakelog.errors.ERROR_CLASSES.items()}
print(json.dumps({"codes": codes, "table": table, "modules": sorted(m for m in sys.modules if m.startswith("lakelog"))}))
"""


def _codes_in_fresh_python(what: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CODES_SCRIPT, what], capture_output=True, text=True, timeout=300,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_lakelog_errors_alone_knows_every_code():
    """A client that imports nothing but lakelog.errors rebuilds any error the server may answer."""
    alone = _codes_in_fresh_python("errors")
    everything = _codes_in_fresh_python("all")
    assert len(everything["modules"]) > len(alone["modules"]) + 50  # the walk really imported the package
    assert not [m for m in alone["modules"] if m != "lakelog" and not m.startswith("lakelog.errors")], \
        "lakelog.errors imports modules above layer 0"
    missing = {code: names for code, names in everything["codes"].items() if code not in alone["codes"]}
    assert not missing, f"REST codes defined outside lakelog.errors (move the class there): {missing}"
    assert alone["codes"] == everything["codes"]
    assert alone["table"] == everything["table"]
    shared = {code: names for code, names in everything["codes"].items() if len(names) > 1}
    assert not shared, f"REST error codes used by more than one error class: {shared}"
    assert {code: names[0] for code, names in everything["codes"].items()} == everything["table"]
    assert all(name.startswith("lakelog.errors.") for name in everything["table"].values())


def test_for_code_looks_up_the_table():
    from lakelog.errors import InternalError
    from lakelog.ingest_api.errors import RequestTimeoutError
    from lakelog.replication.errors import NotLeaderError, UnknownTopicError

    assert for_code(40401) is UnknownTopicError and for_code(42101) is NotLeaderError
    assert for_code(50001) is InternalError and for_code(40802) is RequestTimeoutError
    assert for_code(41899) is None
    assert all(for_code(code) is cls and cls.error_code == code for code, cls in ERROR_CLASSES.items())


def test_subpackage_errors_modules_re_export_their_area():
    """Each subpackage's errors.py is the name its modules import by: the same classes as lakelog.errors."""
    import lakelog.errors as errors

    for package in ("log_tables", "replication", "producers", "consumer_groups", "security", "spark", "ingest_api",
                    "protocol"):
        module = importlib.import_module(f"lakelog.{package}.errors")
        exported = [name for name in module.__all__ if isinstance(getattr(module, name), type)]
        assert exported, package
        for name in exported:
            cls = getattr(module, name)
            if issubclass(cls, LakelogError) and name != "RemoteError":
                assert getattr(errors, name) is cls, f"lakelog.{package}.errors.{name} is not lakelog.errors.{name}"


#: Exceptions of the package that are not LakelogErrors, each with the reason.
NOT_LAKELOG_ERRORS = {
    "lakelog.client.idempotent_producer.DeliveryTimeoutError":
        "a ConnectionError on the client side, as LakelogClient raises when no gateway answers",
}


def test_every_exception_is_a_lakelog_error_or_control_flow_of_its_own_module():
    """An exception class that is not a LakelogError is private (``_Name``) and caught in the module that
    defines it, so it never crosses a module (let alone a layer), or is listed above with its reason."""
    _import_everything()
    others = []
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("lakelog.") or module is None:
            continue
        for cls_name, cls in vars(module).items():
            if not (inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name):
                continue
            if issubclass(cls, LakelogError) or f"{name}.{cls_name}" in NOT_LAKELOG_ERRORS:
                continue
            source = inspect.getsource(module)
            caught = re.search(rf"except\s*\(?[\w\s,.]*\b{cls_name}\b", source)
            if not cls_name.startswith("_") or caught is None or cls_name in getattr(module, "__all__", ()):
                others.append(f"{name}.{cls_name}")
    assert not others, f"exceptions that are not LakelogErrors and leave their module: {others}"


# -- Confluent's codes keep Confluent's meaning; the docs' table says whose each code is ---------------

#: Every REST error code Confluent's REST Proxy defines, with its meaning there: kafka-rest
#: ``kafka-rest/src/main/java/io/confluent/kafkarest/Errors.java``, rest-utils
#: ``core/src/main/java/io/confluent/rest/exceptions/KafkaExceptionMapper.java`` and kafka-rest
#: ``exceptions/KafkaRestExceptionMapper.java`` (SerializationException -> 408 / 40801).
CONFLUENT_CODES = {
    40001: "invalid consumer config constraint",
    40002: "Kafka bad request (topic exists, invalid partitions or replication factor, invalid config)",
    40101: "Kafka authentication error",
    40301: "Kafka authorization error",
    40401: "topic not found",
    40402: "partition not found",
    40403: "consumer instance not found",
    40404: "leader not available",
    40405: "consumer group id not found",
    40601: "consumer format mismatch",
    40801: "serialization exception",
    40901: "consumer already subscribed",
    40902: "consumer already exists",
    40903: "illegal state",
    42201: "key schema missing",
    42202: "value schema missing",
    42203: "JSON conversion failed",
    42204: "invalid consumer config",
    42205: "invalid schema",
    42206: "invalid payload",
    42207: "serialization exception (v3 produce)",
    42208: "produce batch exception",
    42901: "too many requests",
    50001: "internal server error",
    50002: "Kafka error",
    50003: "retriable Kafka error",
    50101: "no SSL support",
    50301: "no simple consumer available",
    50302: "broker not available",
}

#: The class of lakelog that answers each Confluent code it uses: the same meaning as Confluent's.
CONFLUENT_MEANINGS = {
    40001: "MalformedBodyError", 40002: "TopicExistsError", 40101: "AuthenticationError",
    40301: "AuthorizationError", 40401: "UnknownTopicError", 40402: "UnknownPartitionError",
    40403: "ConsumerInstanceNotFoundError", 40404: "LeaderNotAvailableError", 40405: "UnknownGroupError",
    40601: "ConsumerFormatMismatchError", 40801: "RecordDeserializationError",
    40901: "ConsumerAlreadySubscribedError", 40902: "ConsumerAlreadyExistsError", 40903: "IllegalConsumerStateError",
    42201: "KeySchemaMissingError", 42202: "ValueSchemaMissingError", 42205: "InvalidEmbeddedSchemaError",
    42203: "InvalidEncodingError", 42204: "InvalidConsumerConfigError", 42206: "InvalidPartitionInRecordError",
    42901: "ProduceQueueFullError", 50001: "InternalError",
}


def _docs_error_table() -> dict[int, tuple[int, str, str]]:
    """docs/http-api.md's error table: {code: (status, class name, whose)}."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "http-api.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*(\d{5})\s*\|\s*(\d{3})\s*\|\s*`(\w+)`\s*\|\s*(Confluent|lakelog)\s*\|", line)
        if m:
            assert int(m[1]) not in rows, f"code {m[1]} is listed twice"
            rows[int(m[1])] = (int(m[2]), m[3], m[4])
    return rows


def test_confluent_codes_keep_confluents_meaning():
    """A code Confluent defines is answered only by the lakelog class of the same meaning; lakelog's own
    errors take codes Confluent does not define (42201 was lakelog's record too large, Confluent's key
    schema missing)."""
    _import_everything()
    for code, cls in ERROR_CLASSES.items():
        if code in CONFLUENT_CODES:
            assert CONFLUENT_MEANINGS.get(code) == cls.__name__, \
                f"{cls.__name__} answers {code}, which Confluent's REST Proxy defines as {CONFLUENT_CODES[code]!r}"
    from lakelog.errors import (InvalidCommitError, InvalidSubscriptionError, OffsetOutOfRangeError,
                                RecordTooLargeError)

    for cls in (RecordTooLargeError, OffsetOutOfRangeError, InvalidSubscriptionError, InvalidCommitError):
        assert cls.error_code not in CONFLUENT_CODES, cls


def test_the_docs_error_table_says_whose_each_code_is():
    _import_everything()
    table = _docs_error_table()
    assert set(table) == set(ERROR_CLASSES), (
        f"missing from docs/http-api.md: {sorted(set(ERROR_CLASSES) - set(table))}; "
        f"no such code: {sorted(set(table) - set(ERROR_CLASSES))}")
    for code, (status, name, whose) in table.items():
        cls = ERROR_CLASSES[code]
        assert (status, name) == (cls.http_status, cls.__name__), code
        assert whose == ("Confluent" if code in CONFLUENT_CODES else "lakelog"), code


def test_the_client_rebuilds_the_renumbered_classes():
    """A client maps the new codes back to their classes (lakelog.client uses for_code)."""
    from lakelog.errors import (ClusterNotFoundError, LeaderNotAvailableError, OffsetOutOfRangeError,
                                RecordDeserializationError, RecordTooLargeError, RequestTimeoutError,
                                UnknownGroupError)

    for cls in (ClusterNotFoundError, LeaderNotAvailableError, OffsetOutOfRangeError, RecordDeserializationError,
                RecordTooLargeError, RequestTimeoutError, UnknownGroupError):
        err = error_from_response(_answer(cls.http_status, {"error_code": cls.error_code, "message": "m"}, "false"))
        assert isinstance(err, cls), cls


# -- the schema registry's codes: Confluent Schema Registry's, a table of their own ---------------------

#: Confluent Schema Registry's codes lakelog answers (``core/src/main/java/io/confluent/kafka/schemaregistry/
#: rest/exceptions/Errors.java``), with their meaning there.
CONFLUENT_SCHEMA_REGISTRY_CODES = {
    40401: "SubjectNotFoundError", 40402: "VersionNotFoundError", 40403: "SchemaNotFoundError",
    40404: "SubjectSoftDeletedError", 40405: "SubjectNotSoftDeletedError", 40406: "SchemaVersionSoftDeletedError",
    40407: "SchemaVersionNotSoftDeletedError", 40408: "SubjectCompatibilityNotConfiguredError",
    40409: "SubjectModeNotConfiguredError", 40901: "IncompatibleSchemaError", 42201: "InvalidSchemaError",
    42202: "InvalidVersionError", 42203: "InvalidCompatibilityLevelError", 42204: "InvalidModeError",
    42205: "OperationNotPermittedError", 42206: "ReferenceExistsError", 42208: "InvalidSubjectError",
    50001: "SchemaRegistryStoreError", 50002: "SchemaRegistryTimeoutError", 50003: "SchemaRegistryForwardingError",
}


def test_the_schema_registry_answers_confluents_codes_from_its_own_table():
    """The registry's classes stay out of ERROR_CLASSES (REST Proxy's code space), each answers the Confluent
    Schema Registry code of its meaning, one class a code, and docs/schemas.md lists every one."""
    from pathlib import Path

    from lakelog.errors.schemas import SCHEMA_REGISTRY_ERRORS, SchemaRegistryError, registry_error_from_body

    _import_everything()
    registry_classes = [cls for cls in _subclasses(SchemaRegistryError) if "registry_error_code" in cls.__dict__]
    assert {cls.registry_error_code: cls.__name__ for cls in registry_classes} == CONFLUENT_SCHEMA_REGISTRY_CODES
    assert len(registry_classes) == len(CONFLUENT_SCHEMA_REGISTRY_CODES)  # one class a code
    assert {code: cls.__name__ for code, cls in SCHEMA_REGISTRY_ERRORS.items()} == CONFLUENT_SCHEMA_REGISTRY_CODES
    assert not any(issubclass(cls, SchemaRegistryError) for cls in ERROR_CLASSES.values())
    for cls in registry_classes:
        err = cls("m")
        assert err.to_body() == {"error_code": cls.registry_error_code, "message": "m"}
        assert err.error_code == cls.registry_error_code and cls.registry_error_code // 100 == cls.http_status
        assert type(registry_error_from_body(err.to_body())) is cls
    text = (Path(__file__).resolve().parents[1] / "docs" / "schemas.md").read_text()
    rows = {int(m[1]): (int(m[2]), m[3]) for m in
            re.finditer(r"^\|\s*(\d{5})\s*\|\s*(\d{3})\s*\|\s*`(\w+)`\s*\|", text, flags=re.M)}
    assert rows == {cls.registry_error_code: (cls.http_status, cls.__name__) for cls in registry_classes}
