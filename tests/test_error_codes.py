"""Every lakelog error class answers with its own REST error code, and a client rebuilds it."""

from __future__ import annotations

import importlib
import pkgutil

import httpx
import pytest

import lakelog
from lakelog.errors import ERROR_CLASSES, LakelogError
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
