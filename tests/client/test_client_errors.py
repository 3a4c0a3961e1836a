"""httpx's errors do not leak from the clients: no answer is the builtin ConnectionError (HTTP client) or a
retriable LakelogError (the brokers' leader client); an error answer is the server's own LakelogError class,
rebuilt by a client that imported nothing but the client."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import httpx
import pytest

from lakelog.errors import RETRIABLE_HEADER
from lakelog.client import HttpConsumer, LakelogClient
from lakelog.replication.errors import LeaderNotAvailableError
from lakelog.replication.leader_client import LeaderClient


def free_port() -> int:
    """A local TCP port nothing listens on (bound once by the OS, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_answer_is_a_connection_error_not_httpxs():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ConnectionError, match="no gateway reachable") as e:
        LakelogClient(url, timeout_s=2).admin.list_topics()
    assert not isinstance(e.value, httpx.HTTPError)
    consumer = HttpConsumer(f"{url}/consumers/g/instances/c", group="g", instance_id="c", timeout_s=2)
    with pytest.raises(ConnectionError, match="consumer instance at .* did not answer") as e:
        consumer.subscribe(["orders"])
    assert isinstance(e.value.__cause__, httpx.ConnectError) and not isinstance(e.value, httpx.HTTPError)


def test_the_leader_client_answers_no_answer_with_a_retriable_lakelog_error():
    async def call() -> None:
        client = LeaderClient(request_timeout_ms=2_000)
        try:
            await client.partition_offsets(f"http://127.0.0.1:{free_port()}", "orders", 0)
        finally:
            await client.aclose()

    with pytest.raises(LeaderNotAvailableError, match="did not answer") as e:
        asyncio.run(call())
    assert e.value.retriable and e.value.__cause__ is None


def test_a_client_that_imports_only_the_client_rebuilds_every_servers_class():
    """No server module is imported for its error classes: lakelog.client alone knows them all."""
    script = """
import sys, httpx
from lakelog.client import LakelogClient
from lakelog.protocol.errors import error_from_response
import lakelog.errors
err = error_from_response(httpx.Response(409, json={"error_code": 40904, "message": "stale generation"},
                                         headers={%r: "false"}))
print(type(err).__mro__[1].__module__, type(err).__name__, err.error_code, len(lakelog.errors.ERROR_CLASSES),
      "lakelog.consumer_groups.errors" in sys.modules)
""" % RETRIABLE_HEADER
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    module, name, code, known, imported = out.stdout.split()
    assert (module, name, code) == ("lakelog.errors.groups", "IllegalGenerationError", "40904")
    assert int(known) >= 80 and imported == "False"
