"""The coordinators' narrow writer over a real in-process broker and ZooKeeper: the replica manager's adapter
(:class:`~lakelog.replication.partition_writer.ReplicaPartitionWriter`) has the shape of
:class:`~lakelog.coordinators.partition_writer.PartitionWriter`, reports a partition this broker comes to
lead, appends with ``acks=all`` (idempotently with a producer), reads the partition back locally, and writes
a transaction marker that its marker listeners hear."""

from __future__ import annotations

import ast
import asyncio
import inspect

import pyarrow as pa
import pytest

from lakelog.broker import Broker
from lakelog.config import BrokerSettings
from lakelog.coordinators.partition_writer import PartitionWriter
from lakelog.log_tables.records import normalize_produce_batch
from lakelog.log_tables.schema import ATTRIBUTES, CONTROL_BIT
from lakelog.protocol.producer_headers import ProducerBatch
from lakelog.replication.errors import LeaderNotAvailableError
from lakelog.replication.partition_writer import ReplicaPartitionWriter
from lakelog.runtime.zookeeper_server import free_port
from tests.test_layers import ROOT, _imports, _modules

#: The coordinators: every module of ``coordinators/`` and the group coordinator's of ``consumer_groups/``.
COORDINATOR_MODULES = ("lakelog.coordinators.", "lakelog.consumer_groups.coordinator",
                       "lakelog.consumer_groups.group_metadata")
#: What only the writer's implementation may touch: the replica manager, its replicas, the partition logs.
REPLICA_INTERNALS = ("lakelog.replication.replica_manager", "lakelog.replication.partition",
                     "lakelog.log_tables.partition_log")


def _parameters(function) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def test_the_adapter_has_every_method_of_the_protocol_with_its_parameters():
    names = [n for n, _ in inspect.getmembers(PartitionWriter) if not n.startswith("_")]
    assert {"append", "add_role_listener", "add_marker_listener", "read_local", "write_txn_marker"} <= set(names)
    for name in names:
        wanted = inspect.getattr_static(PartitionWriter, name)
        got = inspect.getattr_static(ReplicaPartitionWriter, name)
        if isinstance(wanted, property):
            assert isinstance(got, property), name
            continue
        assert _parameters(got) == _parameters(wanted), name
        assert inspect.iscoroutinefunction(got) == inspect.iscoroutinefunction(wanted), name


def test_the_coordinators_reach_the_replicas_only_through_the_writer():
    """No coordinator module imports the replica manager, a replica or a partition log, or reads an attribute
    named ``replica_manager`` or ``log`` (Kafka's coordinators see a ``PartitionWriter``, never the
    ``ReplicaManager``)."""
    checked, reaching = [], []
    for path, module in _modules():
        if not module.startswith(COORDINATOR_MODULES):
            continue
        checked.append(module)
        tree = ast.parse(path.read_text(), str(path))
        package = module.rsplit(".", 1)[0]
        reaching += [f"{path.relative_to(ROOT)}:{line} imports {imported}" for line, imported in _imports(tree, package)
                     if imported.startswith(REPLICA_INTERNALS)]
        reaching += [f"{path.relative_to(ROOT)}:{node.lineno} reads .{node.attr}" for node in ast.walk(tree)
                     if isinstance(node, ast.Attribute) and node.attr in ("replica_manager", "log")]
    assert "lakelog.coordinators.transaction_log" in checked and "lakelog.consumer_groups.group_metadata" in checked
    assert not reaching, "through the PartitionWriter instead:\n" + "\n".join(reaching)


def test_roles_appends_local_reads_and_markers_through_the_writer(zk_connect, tmp_path):
    async def main() -> None:
        broker = Broker(BrokerSettings(broker_id=0, port=free_port(), log_dirs=tmp_path / "logs",
                                       zookeeper_connect=zk_connect))
        writer = broker.partition_writer
        assert isinstance(writer, PartitionWriter) and writer.broker_id == 0
        roles: list[tuple[str, int, bool, int]] = []
        markers: list[tuple[str, int, int, str]] = []

        def on_role(part) -> None:
            roles.append((part.topic, part.partition, part.is_leader, part.leader_epoch))

        def on_marker(part, producer_id: int, control: str) -> None:
            markers.append((part.topic, part.partition, producer_id, control))

        await broker.start()
        try:
            writer.add_role_listener(on_role)
            writer.add_marker_listener(on_marker)
            await broker.create_topic("coordinated", partitions=1, replication_factor=1)
            for _ in range(200):
                if writer.role("coordinated", 0) is not None and writer.role("coordinated", 0).is_leader:
                    break
                await asyncio.sleep(0.05)
            role = writer.role("coordinated", 0)
            assert role is not None and role.is_leader and role.name == "coordinated-0"
            assert ("coordinated", 0, True, role.leader_epoch) in roles
            assert any(r.name == "coordinated-0" for r in writer.roles())
            assert writer.role("coordinated", 1) is None
            with pytest.raises(LeaderNotAvailableError):
                writer.log_offsets("coordinated", 1)

            first = await writer.append("coordinated", 0, normalize_produce_batch(pa.table({"value": [b"a", b"b"]})))
            assert first == 0 and writer.log_offsets("coordinated", 0) == (0, 2)

            producer_id = await asyncio.to_thread(broker.producer_ids.generate_producer_id)
            assert writer.next_sequence("coordinated", 0, producer_id=producer_id, producer_epoch=0) == 0
            batch = ProducerBatch(producer_id, 0, 0)
            records = normalize_produce_batch(pa.table({"value": [b"c"]}))
            assert await writer.append("coordinated", 0, records, producer=batch) == 2
            assert await writer.append("coordinated", 0, records, producer=batch) == 2  # a retry writes nothing
            assert writer.next_sequence("coordinated", 0, producer_id=producer_id, producer_epoch=0) == 1
            assert writer.next_sequence("coordinated", 0, producer_id=producer_id, producer_epoch=1) == 0

            offset = await writer.write_txn_marker("coordinated", 0, producer_id=producer_id, producer_epoch=0,
                                                   control="abort", coordinator_epoch=0)
            assert offset == 3 and markers == [("coordinated", 0, producer_id, "abort")]
            rows = await asyncio.to_thread(writer.read_local, "coordinated", 0, 0, end_offset=4, max_bytes=1 << 20,
                                           columns=["offset", "value", "producer_id", ATTRIBUTES])
            assert rows["offset"].to_pylist() == [0, 1, 2, 3]  # the marker too
            assert rows["value"].to_pylist()[:3] == [b"a", b"b", b"c"]
            assert [a & CONTROL_BIT != 0 for a in rows[ATTRIBUTES].to_pylist()] == [False, False, False, True]

            writer.remove_role_listener(on_role)
            writer.remove_marker_listener(on_marker)
            writer.remove_marker_listener(on_marker)  # not registered any more: nothing
            await writer.write_txn_marker("coordinated", 0, producer_id=producer_id, producer_epoch=0,
                                          control="abort", coordinator_epoch=0)
            assert len(markers) == 1
            assert (await writer.topic("coordinated")).partitions_count == 1
        finally:
            await broker.stop()

    asyncio.run(main())
