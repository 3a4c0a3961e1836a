"""``lakelog groups``: consumer groups' committed offsets, lag, members, offset resets and deletes, in the
style of Kafka's ``kafka-consumer-groups`` (``--list``, ``--describe``, ``--reset-offsets``,
``--delete-offsets``).

::

    lakelog groups list
    lakelog groups describe GROUP
    lakelog groups reset-offsets GROUP --to-earliest --topic orders:0,2             # prints the plan only
    lakelog groups reset-offsets GROUP --shift-by -10 --all-topics --execute         # commits it
    lakelog groups reset-offsets GROUP --by-duration PT1H30M --topic orders --execute
    lakelog groups delete-offsets GROUP --topic orders:1
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Optional

import typer
from rich.table import Table

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client

groups_app = typer.Typer(help="Consumer groups: committed offsets, lag, members, offset resets and deletes.",
                         no_args_is_help=True)


@groups_app.command("list")
def groups_list(bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """List groups that have committed offsets."""
    with gateway_client(bootstrap_server) as client:
        for name in client.groups.list_groups():
            console.print(name)


@groups_app.command("describe")
def groups_describe(group: str, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Members, their partitions, committed offset, log end offset and lag per partition
    (like kafka-consumer-groups --describe --members)."""
    from lakelog.client import GatewayError

    with gateway_client(bootstrap_server) as client:
        members = client.groups.group_members(group)
        try:
            lag = client.groups.group_lag(group)
        except GatewayError as e:
            if e.error_code != 40405 or not members["members"]:
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
        mt = Table("CONSUMER-ID", "CLIENT-ID", "HOST", "BROKER", "BASE-URI", "#PARTITIONS", "ASSIGNMENT")
        for m in members["members"]:
            mt.add_row(m["member_id"], m.get("client_id") or "-", m.get("client_host") or "-", str(m["broker_id"]),
                       m["base_uri"] or "-", str(len(m["assignment"])),
                       ",".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]) or "-")
        console.print(mt)


#: Java's ``Duration.parse`` grammar (``PnDTnHnMn.nS``, each part optionally signed, a sign before ``P``
#: negates the whole), which Kafka's ``--by-duration`` takes.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?=[-+]?\d)(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (Kafka's ``--by-duration``), in ms:
    ``PT1H30M`` -> 5400000, ``P1DT2H`` -> 93600000 (a day is 24 hours), ``PT0.5S`` -> 500.

    Raises:
        typer.Exit: (through :func:`fail`) ``text`` is not such a duration, e.g. ``1h`` or ``P1M``
            (months and years are not durations).
    """
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.group(i) is not None for i in (2, 3, 4, 5)):
        fail(f"--by-duration {text!r} is not an ISO-8601 duration PnDTnHnMn.nS: use e.g. PT1H30M, P1DT2H or "
             "PT45S (days, hours, minutes, seconds; no months or years)")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(seconds or 0) * 1000
    if fraction:
        frac_ms = int((fraction + "000")[:3])
        ms += -frac_ms if (seconds or "").startswith("-") else frac_ms
    return -ms if sign == "-" else ms


def parse_topic_partitions(specs: list[str], *, option: str = "--topic") -> tuple[list[str], list[tuple[str, int]]]:
    """Repeated ``--topic`` values, Kafka's ``t`` (every partition) or ``t:0,2`` (these partitions), as
    ``(topics, [(topic, partition), ...])``.

    Raises:
        typer.Exit: (through :func:`fail`) an empty topic or a partition list that is not integers >= 0.
    """
    topics: list[str] = []
    partitions: list[tuple[str, int]] = []
    for spec in specs:
        topic, sep, plist = spec.partition(":")
        topic = topic.strip()
        if not topic:
            fail(f"{option} {spec!r}: no topic name; use {option} TOPIC or {option} TOPIC:0,2")
        if not sep:
            topics.append(topic)
            continue
        items = [x.strip() for x in plist.split(",")]
        if not all(re.fullmatch(r"\d+", x) for x in items):
            fail(f"{option} {spec!r}: the partitions after ':' must be numbers >= 0 separated by commas, "
                 f"e.g. {option} {topic}:0,2")
        partitions += [(topic, int(x)) for x in items]
    return topics, partitions


def _reset_target(*, to_earliest: bool, to_latest: bool, to_current: bool, to_offset: int | None,
                  to_datetime: str | None, shift_by: int | None, by_duration: str | None) -> tuple[str, int | None]:
    """The one reset target given, as the reset route's ``(to, value)``; :func:`fail` on none or several."""
    given = {"--to-earliest": to_earliest, "--to-latest": to_latest, "--to-current": to_current,
             "--to-offset": to_offset is not None, "--to-datetime": to_datetime is not None,
             "--shift-by": shift_by is not None, "--by-duration": by_duration is not None}
    chosen = [name for name, on in given.items() if on]
    if len(chosen) != 1:
        fail(("several reset targets: " + ", ".join(chosen) + "; " if chosen else "no reset target; ")
             + "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset N, --to-datetime T, "
               "--shift-by N, --by-duration D")
    if to_earliest:
        return "earliest", None
    if to_latest:
        return "latest", None
    if to_current:
        return "current", None
    if to_offset is not None:
        return "offset", to_offset
    if shift_by is not None:
        return "shift", shift_by
    if by_duration is not None:
        return "duration", parse_duration_ms(by_duration)
    try:
        return "timestamp", int(datetime.fromisoformat(to_datetime.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        fail(f"--to-datetime {to_datetime!r} is not an ISO-8601 date-time: use e.g. 2024-01-31T12:00:00.000 "
             "(local time) or 2024-01-31T12:00:00Z")


TopicOpt = Annotated[Optional[list[str]], typer.Option(
    "--topic", help="TOPIC (all its partitions) or TOPIC:0,2 (these partitions); repeatable.")]


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: str,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offsets.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the high watermarks.")] = False,
    to_current: Annotated[bool, typer.Option("--to-current", help="Reset to the committed offsets.")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", help="Reset to this offset.")] = None,
    to_datetime: Annotated[Optional[str], typer.Option(
        "--to-datetime", help="The first offset at or after this time: ISO-8601, e.g. 2024-01-31T12:00:00Z.")] = None,
    shift_by: Annotated[Optional[int], typer.Option(
        "--shift-by", help="Move the committed offsets by N (may be negative).")] = None,
    by_duration: Annotated[Optional[str], typer.Option(
        "--by-duration", help="The first offset at or after now minus this ISO-8601 duration, e.g. PT1H30M, "
                              "P1DT2H.")] = None,
    topic: TopicOpt = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="Every topic the group committed offsets for (the default without --topic).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print the new offsets (the default).")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the new offsets.")] = False,
    bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Move a group with no active members to new offsets (kafka-consumer-groups --reset-offsets).
    Without --execute only the plan is printed, nothing is committed."""
    to, value = _reset_target(to_earliest=to_earliest, to_latest=to_latest, to_current=to_current,
                              to_offset=to_offset, to_datetime=to_datetime, shift_by=shift_by, by_duration=by_duration)
    if all_topics and topic:
        fail("--all-topics and --topic exclude each other: give one (no --topic means every topic of the group)")
    if dry_run and execute:
        fail("--dry-run and --execute exclude each other: give one (without --execute nothing is committed)")
    topics, partitions = parse_topic_partitions(topic or [])
    with gateway_client(bootstrap_server) as client:
        result = client.groups.reset_offsets(group, to=to, value=value, topics=topics or None,
                                      partitions=partitions or None, dry_run=not execute)
    table = Table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for o in result["offsets"]:
        table.add_row(group, o["topic"], str(o["partition"]), str(o["offset"]))
    console.print(table)
    if not execute:
        console.print("Dry run: nothing was committed. Add --execute to commit these offsets."
                      + ("" if dry_run else " (Without --dry-run or --execute, reset-offsets only prints the plan, "
                                            "as kafka-consumer-groups does.)"))


@groups_app.command("delete-offsets")
def groups_delete_offsets(group: str, topic: TopicOpt = None, bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Delete a group's committed offsets of topics or partitions (kafka-consumer-groups --delete-offsets);
    the group must have no active members."""
    if not topic:
        fail("name what to delete with --topic TOPIC (all its partitions) or --topic TOPIC:0,2")
    topics, partitions = parse_topic_partitions(topic)
    by_topic: dict[str, list[int] | None] = {t: None for t in topics}
    for t, p in partitions:
        if t not in topics:
            by_topic.setdefault(t, []).append(p)
    deleted: list[dict] = []
    with gateway_client(bootstrap_server) as client:
        for t, parts in by_topic.items():
            deleted += client.groups.delete_offsets(group, t, parts)
    table = Table("GROUP", "TOPIC", "PARTITION", "STATUS")
    for d in sorted(deleted, key=lambda d: (d["topic"], d["partition"])):
        table.add_row(group, d["topic"], str(d["partition"]), "Successful")
    console.print(table)
    console.print(f"Deleted the committed offsets of {len(deleted)} partition(s) of group {group}.")
