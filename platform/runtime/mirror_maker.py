"""Apache Kafka's MirrorMaker 2 (``connect-mirror``) between two clusters that speak Kafka's protocol:
Apache Kafka to lakelog, lakelog to lakelog, or lakelog to Kafka.

lakelog does not reimplement mirroring: :class:`MirrorMaker` runs Kafka's own driver
(``org.apache.kafka.connect.mirror.MirrorMaker``, "dedicated mode" of KIP-382) on the jars of
:func:`~lakelog.runtime.kafka_jars.kafka_jars` and :func:`~lakelog.runtime.kafka_jars.kafka_connect_jars`
(Maven Central, cached), with a properties file that :func:`mirror_maker_properties` writes for one
source → target flow. MirrorMaker 2 then

- copies the topics matching ``topics`` (``MirrorSourceConnector``), named ``{source alias}.{topic}`` on the
  target (Kafka's ``DefaultReplicationPolicy``) or unchanged (``IdentityReplicationPolicy``), with their
  partitions and topic configs;
- records offset syncs and emits checkpoints of the groups matching ``groups``
  (``MirrorCheckpointConnector``) and, with ``sync.group.offsets.enabled`` (on here), commits their
  translated offsets to the target cluster, so a consumer that moves there resumes at the translated offset
  (KIP-545; translation is conservative: the resumed position is at or before the source's committed one);
- keeps its own state in compacted topics of the target cluster (``mm2-configs/offsets/status.{source}
  .internal``) and heartbeats in ``heartbeats``.

``lakelog mirror start`` is the command that runs it (docs: operations).
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Literal

from lakelog.processes import spawn, stop_child
from lakelog.runtime.kafka_jars import LOG4J2_WARN, KAFKA_VERSION, kafka_connect_jars, kafka_jars, kafka_tool_command

__all__ = ["MIRROR_MAKER_MAIN", "MirrorMaker", "mirror_maker_properties"]

#: Kafka's MirrorMaker 2 driver (``bin/connect-mirror-maker.sh``)
MIRROR_MAKER_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"

#: a cluster alias as MirrorMaker 2 accepts it in ``clusters`` (it becomes part of topic names)
_ALIAS = re.compile(r"[A-Za-z0-9_-]{1,64}")

_POLICIES = {"default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
             "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}

#: log4j2 configuration of the MirrorMaker JVM: INFO of MirrorMaker's own classes, WARN of the rest
_LOG4J2 = LOG4J2_WARN + "logger.mirror.name = org.apache.kafka.connect.mirror\nlogger.mirror.level = INFO\n"


def mirror_maker_properties(*, source_alias: str, source_bootstrap: str, target_alias: str, target_bootstrap: str,
                            topics: str = ".*", groups: str = ".*", replication_factor: int = 1,
                            replication_policy: Literal["default", "identity"] = "default",
                            interval_s: int = 5, overrides: dict[str, str] | None = None) -> str:
    """The text of an ``mm2.properties`` for one flow ``source_alias -> target_alias``.

    Args:
        source_alias, target_alias: cluster aliases (letters, digits, ``_``, ``-``; different). The source's
            alias prefixes the mirrored topics' names under the default replication policy.
        source_bootstrap, target_bootstrap: ``host:port[,host:port...]`` of each cluster's Kafka listeners.
        topics, groups: Java regular expressions of the topics to mirror and the consumer groups whose
            offsets are checkpointed and synced (MirrorMaker's ``topics`` / ``groups``).
        replication_factor: of the mirrored topics and of MirrorMaker's internal topics on the target.
        replication_policy: ``default`` (``{source}.{topic}``) or ``identity`` (same names; one-way flows only).
        interval_s: how often (s) topics and groups are refreshed, checkpoints emitted and group offsets
            synced (MirrorMaker's ``refresh.*.interval.seconds``, ``emit.checkpoints.interval.seconds``,
            ``sync.group.offsets.interval.seconds``; Kafka's defaults are 60 to 600 s).
        overrides: more MirrorMaker properties (``key: value``), written last so they win.

    Raises:
        ValueError: a bad alias, equal aliases, an empty bootstrap or a replication factor below 1.
    """
    for name, alias in (("source", source_alias), ("target", target_alias)):
        if not _ALIAS.fullmatch(alias):
            raise ValueError(f"the {name} alias {alias!r} must be 1 to 64 letters, digits, '_' or '-'")
    if source_alias == target_alias:
        raise ValueError(f"the source and target aliases are both {source_alias!r}: give each cluster its own")
    for name, bootstrap in (("source", source_bootstrap), ("target", target_bootstrap)):
        if not bootstrap.strip():
            raise ValueError(f"the {name} bootstrap servers are empty: give host:port of its Kafka listener")
    if replication_factor < 1:
        raise ValueError(f"replication factor {replication_factor} must be at least 1")
    flow = f"{source_alias}->{target_alias}"
    rf = str(replication_factor)
    props: dict[str, str] = {
        "clusters": f"{source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers": source_bootstrap,
        f"{target_alias}.bootstrap.servers": target_bootstrap,
        f"{flow}.enabled": "true",
        f"{flow}.topics": topics,
        f"{flow}.groups": groups,
        f"{target_alias}->{source_alias}.enabled": "false",
        "replication.policy.class": _POLICIES[replication_policy],
        "replication.factor": rf,
        "checkpoints.topic.replication.factor": rf,
        "heartbeats.topic.replication.factor": rf,
        "offset-syncs.topic.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "config.storage.replication.factor": rf,
        "sync.group.offsets.enabled": "true",
        "emit.checkpoints.enabled": "true",
        "refresh.topics.interval.seconds": str(interval_s),
        "refresh.groups.interval.seconds": str(interval_s),
        "emit.checkpoints.interval.seconds": str(interval_s),
        "sync.group.offsets.interval.seconds": str(interval_s),
        **(overrides or {}),
    }
    return "".join(f"{key} = {value}\n" for key, value in props.items())


class MirrorMaker:
    """One MirrorMaker 2 JVM in dedicated mode, driving the flows of ``properties_file`` into ``target_alias``.

    ``log_file`` gets its console output. :meth:`stop` ends it by its pid (SIGTERM: MirrorMaker commits
    its offsets and leaves its group; SIGKILL after ``timeout_s``).
    """

    def __init__(self, properties_file: Path, *, target_alias: str, log_file: Path, heap: str = "512m",
                 version: str = KAFKA_VERSION) -> None:
        self.properties_file, self.target_alias = Path(properties_file), target_alias
        self.log_file, self.heap, self.version = Path(log_file), heap, version
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def command(self) -> list[str]:
        """The ``java`` command line (fetches the jars once)."""
        log4j = self.log_file.with_name(self.log_file.stem + "-log4j2.properties")
        log4j.write_text(_LOG4J2)
        return kafka_tool_command(MIRROR_MAKER_MAIN, "--clusters", self.target_alias, "--",
                                  str(self.properties_file), libs=kafka_jars(self.version), heap=self.heap,
                                  extra_libs=(kafka_connect_jars(self.version),), log4j2_file=log4j)

    def start(self) -> "MirrorMaker":
        """Start the JVM (it connects to both clusters by itself and retries while one is unreachable).

        Raises:
            RuntimeError: the jars cannot be fetched, or the JVM exited at once (its log's tail is in the
                message).
        """
        command = self.command()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as out:
            self.process = spawn(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, death_signal=signal.SIGTERM)
        try:
            self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            return self
        raise RuntimeError(f"MirrorMaker exited with {self.process.returncode}:\n{self.log_tail()}")

    def wait(self) -> int:
        """Wait for the JVM to end; its exit code."""
        return self.process.wait() if self.process is not None else 0

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM the JVM by its pid, SIGKILL if it is still there after ``timeout_s``."""
        if self.process is not None:
            stop_child(self.process, timeout_s=timeout_s)
