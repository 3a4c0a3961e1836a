"""``lakelog produce`` and ``lakelog consume``: lines in, records out (like Kafka's console tools);
``lakelog records delete``: the records below an offset go (like kafka-delete-records)."""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, err_console, fail, gateway_client

records_app = typer.Typer(help="Records: delete those below an offset (kafka-delete-records).", no_args_is_help=True)


def producer_client(bootstrap: str, *, enable_idempotence: bool):
    """A :class:`LakelogClient` that produces idempotently or not; a gateway error or an unreachable
    gateway ends the command with its message (:func:`~lakelog.cli.common.gateway_client`)."""
    return gateway_client(bootstrap, enable_idempotence=enable_idempotence)


def produce(
    topic: str,
    file: Annotated[Optional[Path], typer.Option(help="Read lines from this file instead of stdin.")] = None,
    key_separator: Annotated[Optional[str], typer.Option(help="Split each line into key and value at the first separator.")] = None,
    partition: Annotated[Optional[int], typer.Option(help="Send every record to this partition.")] = None,
    batch_records: Annotated[int, typer.Option(help="Records per HTTP request.")] = 1000,
    idempotence: Annotated[bool, typer.Option(
        "--idempotence/--no-idempotence",
        help="Idempotent produce (enable.idempotence): a producer id and a sequence per request, retries "
             "with the same sequence write nothing twice. --no-idempotence: plain REST Proxy requests.")] = True,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Produce each input line as a record (like kafka-console-producer); a progress bar for files.
    Idempotent by default: a request retried after a timeout or a leader change is written once."""
    from rich.progress import Progress

    stream = file.open("rb") if file else sys.stdin.buffer
    total = file.stat().st_size if file else None
    sent = 0
    with producer_client(bootstrap_server, enable_idempotence=idempotence) as client, \
            Progress(console=err_console, disable=file is None) as progress:
        task = progress.add_task(f"producing to {topic}", total=total)
        batch: list[tuple[bytes | None, bytes]] = []

        def flush() -> None:
            nonlocal sent
            if batch:
                client.produce_binary(topic, batch, partition=partition)
                sent += len(batch)
                batch.clear()

        for raw in stream:
            progress.advance(task, len(raw))
            line = raw.rstrip(b"\r\n")
            if key_separator is not None:
                sep = key_separator.encode()
                key, found, value = line.partition(sep)
                batch.append((key, value) if found else (None, line))
            else:
                batch.append((None, line))
            if len(batch) >= batch_records:
                flush()
        flush()
    err_console.print(f"{sent} records produced to {topic}.")


def consume(
    topic: str,
    from_beginning: Annotated[bool, typer.Option(help="Start at the log start offset (default: the end).")] = False,
    offset: Annotated[Optional[int], typer.Option(help="Start at this offset (needs --partition or applies to all).")] = None,
    partition: Annotated[Optional[int], typer.Option(help="Only this partition.")] = None,
    follow: Annotated[bool, typer.Option(help="Keep waiting for new records (Ctrl-C stops).")] = False,
    max_messages: Annotated[Optional[int], typer.Option(help="Stop after this many records.")] = None,
    print_key: Annotated[bool, typer.Option(help="Print key<separator>value.")] = False,
    key_separator: Annotated[str, typer.Option(help="Separator between printed key and value.")] = "\t",
    print_offset: Annotated[bool, typer.Option(help="Prefix partition:offset.")] = False,
    group: Annotated[Optional[str], typer.Option("--group", help="Join this consumer group (an HTTP consumer "
                                                 "instance): resume at its committed offsets, commit after printing.")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Print records of a topic (like kafka-console-consumer); without --follow stop at the end."""
    if group is not None:
        return _consume_group(topic, group, from_beginning=from_beginning, follow=follow, max_messages=max_messages,
                              print_key=print_key, key_separator=key_separator, print_offset=print_offset,
                              bootstrap_server=bootstrap_server)
    out = sys.stdout.buffer
    count = 0
    with gateway_client(bootstrap_server) as client:
        try:
            info = client.admin.describe_topic(topic)
            parts = [p["partition"] for p in info["partitions"]] if partition is None else [partition]
            positions = {}
            for p in parts:
                offs = client.partition_offsets(topic, p)
                positions[p] = offset if offset is not None else (
                    offs["beginning_offset"] if from_beginning else offs["end_offset"])
            while True:
                got_any = False
                for p in parts:
                    page = client.fetch_page(topic, p, positions[p], max_bytes=4 * 1024 * 1024, form="arrow",
                                             max_wait_ms=0 if len(parts) > 1 or not follow else 500)
                    got_any = got_any or page.next_offset > positions[p]  # records, or markers moved past
                    records, positions[p] = page.records, page.next_offset
                    if records.num_rows == 0:
                        continue
                    keys, values = records["key"].to_pylist(), records["value"].to_pylist()
                    for o, k, v in zip(records["offset"].to_pylist(), keys, values):
                        line = b""
                        if print_offset:
                            line += f"{p}:{o}{key_separator}".encode()
                        if print_key:
                            line += (k if k is not None else b"null") + key_separator.encode()
                        line += v if v is not None else b"null"
                        out.write(line + b"\n")
                        count += 1
                        if max_messages is not None and count >= max_messages:
                            out.flush()
                            return
                out.flush()
                if not got_any:
                    if not follow:
                        break
                    if len(parts) > 1:
                        time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    err_console.print(f"Processed a total of {count} messages")


def _consume_group(topic: str, group: str, *, from_beginning: bool, follow: bool, max_messages: int | None,
                   print_key: bool, key_separator: str, print_offset: bool, bootstrap_server: str) -> None:
    """``consume --group``: a REST Proxy consumer instance in ``group``; records are printed, then
    committed (at-least-once); the instance is deleted on exit and Ctrl-C. Without ``--follow`` it stops
    once its partitions are read to the end."""
    from lakelog.client import GatewayError

    out = sys.stdout.buffer
    count = 0
    sep = key_separator.encode()
    with gateway_client(bootstrap_server) as client:
        consumer = None
        try:
            consumer = client.groups.create_consumer(group, auto_offset_reset="earliest" if from_beginning else "latest",
                                              auto_commit=False)
            consumer.subscribe([topic])
            deadline = time.monotonic() + 10  # without --follow: give up if no partition is assigned by then
            while True:
                records = consumer.poll(timeout_ms=1000)
                printed: dict[int, int] = {}  # partition -> last printed offset
                for r in records:
                    k = None if r["key"] is None else base64.b64decode(r["key"])
                    v = None if r["value"] is None else base64.b64decode(r["value"])
                    line = f"{r['partition']}:{r['offset']}{key_separator}".encode() if print_offset else b""
                    if print_key:
                        line += (k if k is not None else b"null") + sep
                    out.write(line + (v if v is not None else b"null") + b"\n")
                    printed[r["partition"]] = r["offset"]
                    count += 1
                    if max_messages is not None and count >= max_messages:
                        break
                out.flush()
                if printed:
                    # commit after printing (at-least-once): the last printed offset of each partition
                    consumer.commit([{"topic": topic, "partition": p, "offset": o} for p, o in printed.items()])
                    if max_messages is not None and count >= max_messages:
                        break
                elif not follow and (consumer.assignment() or time.monotonic() > deadline):
                    break  # read to the end of its partitions
        except KeyboardInterrupt:
            pass
        finally:
            if consumer is not None:
                try:
                    consumer.close()
                except (GatewayError, OSError):
                    pass
    err_console.print(f"Processed a total of {count} messages")


def read_offset_json(path: Path) -> dict[tuple[str, int], int]:
    """kafka-delete-records' offsets JSON, ``{"partitions": [{"topic": "t", "partition": 0, "offset": 10}],
    "version": 1}`` (an offset of -1 is the partition's high watermark), as ``{(topic, partition): offset}``.
    A malformed file ends the command with a message saying what to fix."""
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        fail(f"--offset-json-file {path}: {e.strerror}")
    except ValueError as e:
        fail(f"--offset-json-file {path}: not JSON ({e})")
    if not isinstance(doc, dict) or doc.get("version", 1) != 1 or not isinstance(doc.get("partitions"), list):
        fail(f"--offset-json-file {path}: expected {{\"partitions\": [{{\"topic\": ..., \"partition\": ..., "
             f"\"offset\": ...}}], \"version\": 1}}")
    offsets: dict[tuple[str, int], int] = {}
    for entry in doc["partitions"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("topic"), str)
                and all(type(entry.get(k)) is int for k in ("partition", "offset"))):
            fail(f"--offset-json-file {path}: each partition needs a string topic and integer partition and offset, "
                 f"not {json.dumps(entry)}")
        key = (entry["topic"], entry["partition"])
        if key in offsets:
            fail(f"--offset-json-file {path}: partition {key[0]}-{key[1]} is named twice")
        offsets[key] = entry["offset"]
    if not offsets:
        fail(f"--offset-json-file {path}: no partition named")
    return offsets


@records_app.command("delete")
def delete_records(
    offset_json_file: Annotated[Path, typer.Option(
        "--offset-json-file", help='kafka-delete-records\' JSON: {"partitions": [{"topic": "orders", "partition": 0, '
                                   '"offset": 100}], "version": 1}; offset -1 = the high watermark.')],
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete every record below the given offset of each partition (like kafka-delete-records): the log
    start offsets move up, the Delta data files wholly below them leave the tables. Needs Delete on the
    topics. Prints each partition's low watermark (its log start offset afterwards)."""
    offsets = read_offset_json(offset_json_file)
    with gateway_client(bootstrap_server) as client:
        console.print("Executing records delete operation")
        low_watermarks = client.admin.delete_records(offsets)
    console.print("Records delete operation completed:")
    for (topic, partition), low in sorted(low_watermarks.items()):
        typer.echo(f"partition: {topic}-{partition}\tlow_watermark: {low}")  # kafka-delete-records' lines, tab kept
