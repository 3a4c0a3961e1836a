"""The embedded object store: a real s3proxy from Maven Central's jars, run with the machine's Java."""

from __future__ import annotations

import os
import signal

import httpx
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError

from lakelog.errors import ObjectStoreStartError, for_code
from lakelog.processes import process_alive
from lakelog.runtime.object_store import ObjectStoreServer, ensure_s3proxy_jars, s3proxy_jars_dir
from tests.harness import wait_gone


def test_jars_come_from_the_cache_once_fetched():
    jars = ensure_s3proxy_jars()
    assert jars == s3proxy_jars_dir()
    names = {p.name for p in jars.glob("*.jar")}
    assert "s3proxy-4.0.0.jar" in names
    # the pin: Jackson 3's databind needs the 2.22 annotations, not the 2.18.3 that s3proxy's Jackson 2 brings
    assert "jackson-annotations-2.22.jar" in names and not any(n.startswith("jackson-annotations-2.18") for n in names)


def test_delta_tables_round_trip_through_the_server(object_store, lake):
    """delta-rs writes a table to the store and reads it back with the lake's storage options; a commit
    under wrong credentials is refused, so the server checks signatures."""
    uri = f"{lake.uri}/roundtrip"
    write_deltalake(uri, pa.table({"offset": [0, 1, 2]}), storage_options=lake.storage_options)
    write_deltalake(uri, pa.table({"offset": [3]}), storage_options=lake.storage_options, mode="append")
    table = DeltaTable(uri, storage_options=lake.storage_options)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table()["offset"].to_pylist()) == [0, 1, 2, 3]
    assert lake.table_uris() == [uri]
    wrong = {**lake.storage_options, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    with pytest.raises((DeltaError, OSError)):
        write_deltalake(uri, pa.table({"offset": [4]}), storage_options=wrong, mode="append")


def test_server_starts_on_a_free_port_and_stops_by_pid(tmp_path):
    server = ObjectStoreServer(data_dir=tmp_path / "s3")
    with server:
        pid = server.pid
        assert process_alive(pid)
        assert (tmp_path / "s3" / "s3proxy.pid").read_text().strip() == str(pid)
        assert httpx.get(server.endpoint_url + "/").status_code == 403  # an unsigned request: refused
        server.create_bucket("kept")
        config = (tmp_path / "s3" / "s3proxy.conf").stat()
        assert config.st_mode & 0o077 == 0  # the secret is readable by its owner only
    wait_gone([pid], what="s3proxy")
    assert not (tmp_path / "s3" / "s3proxy.pid").exists()
    assert (tmp_path / "s3" / "buckets" / "kept").is_dir()  # the data stays for the next start


def test_a_taken_port_is_a_start_error_naming_the_log(object_store, tmp_path):
    server = ObjectStoreServer(data_dir=tmp_path / "s3", port=object_store.port)
    with pytest.raises(ObjectStoreStartError) as raised:
        server.start()
    assert str(server.log_file) in str(raised.value)
    assert server.secret_access_key not in str(raised.value)
    assert not server.is_running()
    assert for_code(50330) is ObjectStoreStartError and raised.value.retriable


def test_server_dies_with_a_sigterm(tmp_path):
    server = ObjectStoreServer(data_dir=tmp_path / "s3").start()
    pid = server.pid
    os.kill(pid, signal.SIGTERM)
    wait_gone([pid], what="s3proxy")
    server.stop()  # reaps it; nothing left to stop
    assert not server.is_running()
