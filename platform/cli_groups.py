"""``lakelog groups``: consumer groups' committed offsets, lag, members and offset resets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from lakelog.cli_common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client

groups_app = typer.Typer(help="Consumer groups: committed offsets, lag, resets.", no_args_is_help=True)


@groups_app.command("list")
def groups_list(bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """List groups that have committed offsets."""
    with gateway_client(bootstrap_server) as client:
        for name in client.list_groups():
            console.print(name)


@groups_app.command("describe")
def groups_describe(group: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Members, their partitions, committed offset, log end offset and lag per partition
    (like kafka-consumer-groups --describe --members)."""
    from lakelog.client import GatewayError

    with gateway_client(bootstrap_server) as client:
        members = client.group_members(group)
        try:
            lag = client.group_lag(group)
        except GatewayError as e:
            if e.error_code != 40407 or not members["members"]:
                raise
            lag = {"partitions": [], "total_lag": 0}  # members, but nothing committed yet
        owner = {(a["topic"], a["partition"]): m["member_id"] for m in members["members"] for a in m["assignment"]}
        rows = {(p["topic"], p["partition"]): p for p in lag["partitions"]}
        for t, p in sorted(set(owner) - set(rows)):
            offs = client.partition_offsets(t, p)
            rows[(t, p)] = {"topic": t, "partition": p, "committed_offset": None, "log_end_offset": offs["end_offset"],
                            "high_watermark": offs["end_offset"], "lag": offs["end_offset"] - offs["beginning_offset"]}
    table = Table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "HIGH-WATERMARK", "LAG", "CONSUMER-ID")
    for key, p in sorted(rows.items()):
        table.add_row(group, p["topic"], str(p["partition"]),
                      "-" if p["committed_offset"] is None else str(p["committed_offset"]),
                      str(p["log_end_offset"]), str(p["high_watermark"]), str(p["lag"]), owner.get(key, "-"))
    console.print(table)
    console.print(f"Total lag: {sum(p['lag'] for p in rows.values())}")
    console.print(f"State: {members['state']}\tGeneration: {members['generation'] if members['generation'] is not None else '-'}"
                  f"\tAssignor: {members['assignor'] or '-'}\tMembers: {len(members['members'])}")
    if members["members"]:
        mt = Table("CONSUMER-ID", "BROKER", "BASE-URI", "#PARTITIONS", "ASSIGNMENT")
        for m in members["members"]:
            mt.add_row(m["member_id"], str(m["broker_id"]), m["base_uri"], str(len(m["assignment"])),
                       ",".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]) or "-")
        console.print(mt)


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: str,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offsets.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the high watermarks.")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", help="Reset to this offset.")] = None,
    to_datetime: Annotated[Optional[str], typer.Option("--to-datetime", help="ISO-8601, e.g. 2024-01-31T12:00:00Z.")] = None,
    topic: Annotated[Optional[list[str]], typer.Option("--topic", help="Topic(s) to reset (default: all the group's).")] = None,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Move a group with no active members to new offsets."""
    from datetime import datetime


    chosen = [x for x in (to_earliest, to_latest, to_offset is not None, to_datetime is not None) if x]
    if len(chosen) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime T")
    if to_earliest:
        to, value = "earliest", None
    elif to_latest:
        to, value = "latest", None
    elif to_offset is not None:
        to, value = "offset", to_offset
    else:
        try:
            value = int(datetime.fromisoformat(to_datetime.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            fail(f"--to-datetime {to_datetime!r} is not an ISO-8601 date-time")
        to = "timestamp"
    with gateway_client(bootstrap_server) as client:
        result = client.reset_offsets(group, to=to, value=value, topics=topic)
    table = Table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for o in result["offsets"]:
        table.add_row(group, o["topic"], str(o["partition"]), str(o["offset"]))
    console.print(table)
