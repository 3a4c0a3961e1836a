"""A partition table in a shared lake (``lake.uri`` on a real S3-compatible server): one table for all the
partition's replicas, each with its own segment tail; only the leader commits, a new leader continues the
table from its lake end offset."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog.config import TopicConfig
from lakelog.log_tables.errors import CommitFailedError, NonContiguousOffsetsError, OffsetOutOfRangeError
from lakelog.log_tables.log_manager import LogManager
from lakelog.log_tables.partition_log import PartitionLog
from lakelog.log_tables.records import with_fetched_range
from tests.harness import wait_for

CONFIG = TopicConfig.parse({"lake.commit.interval.ms": "1000"})


def replica(lake, uri: str, local_dir) -> PartitionLog:
    return PartitionLog.open(topic="t", partition=0, table_uri=uri, config=CONFIG, local_dir=local_dir,
                             storage_options=lake.storage_options, initial_high_watermark=0)


def records(start: int, n: int) -> pa.Table:
    return pa.table({"value": pa.array([f"v{i}".encode() for i in range(start, start + n)], pa.binary())})


def replicate(leader: PartitionLog, follower: PartitionLog) -> None:
    follower.append_replicated(leader.read(follower.log_end_offset, end_offset=leader.log_end_offset,
                                           control_records=True))
    for log in (leader, follower):
        log.advance_high_watermark(leader.log_end_offset)


def test_only_the_leader_commits_and_a_new_leader_continues_the_table(lake, tmp_path):
    uri = f"{lake.uri}/t-topicid/0"
    a, b = replica(lake, uri, tmp_path / "a"), replica(lake, uri, tmp_path / "b")
    assert a.shared_lake and b.shared_lake and a.tiered and b.tiered
    assert lake.table_uris() == [uri]  # both replicas opened the one table
    a.set_lake_leader(True)
    a.append(records(0, 5), leader_epoch=0)
    replicate(a, b)
    # the follower commits nothing; the leader commits its tail
    assert b.flush_to_lake() == 0
    assert a.flush_to_lake() == 5
    assert lake.table_offsets(uri) == [0, 1, 2, 3, 4]
    # the follower takes the table's end and keeps only the tail the table lacks
    assert b.lake_end_offset == 0
    assert b.catch_up_lake_end() == 5
    assert b.lake_end_offset == 5 and b.unflushed_bytes == 0
    assert b.read(0, end_offset=5)["offset"].to_pylist() == [0, 1, 2, 3, 4]  # read from the table now
    # acknowledged, replicated, not in the table yet: the leader goes away
    a.append(records(5, 4), leader_epoch=0)
    replicate(a, b)
    a.set_lake_leader(False)
    a.close()
    # the new leader continues the same table from its lake end offset: nothing twice, nothing lost
    b.set_lake_leader(True)
    assert b.flush_to_lake() == 4
    offsets = lake.table_offsets(uri)
    assert sorted(offsets) == list(range(9)) and len(set(offsets)) == 9
    assert lake.table_uris() == [uri]


def test_a_new_leader_takes_over_past_the_table_end_its_own_replica_knew(lake, tmp_path):
    """The follower never caught up with the table (no flusher round ran): as leader it starts from the
    table's lake end offset, not its own, so what the old leader committed is not committed again."""
    uri = f"{lake.uri}/t-topicid/0"
    a, b = replica(lake, uri, tmp_path / "a"), replica(lake, uri, tmp_path / "b")
    a.set_lake_leader(True)
    a.append(records(0, 6), leader_epoch=0)
    replicate(a, b)
    assert a.flush_to_lake() == 6
    a.append(records(6, 2), leader_epoch=0)
    replicate(a, b)
    a.set_lake_leader(False)
    assert b.lake_end_offset == 0
    b.set_lake_leader(True)
    assert b.flush_to_lake() == 2
    assert b.lake_end_offset == 8
    assert sorted(lake.table_offsets(uri)) == list(range(8))
    assert b.unflushed_bytes == 0


def test_a_follower_never_truncates_the_shared_table(lake, tmp_path):
    uri = f"{lake.uri}/t-topicid/0"
    a, b = replica(lake, uri, tmp_path / "a"), replica(lake, uri, tmp_path / "b")
    a.set_lake_leader(True)
    a.append(records(0, 4), leader_epoch=0)
    replicate(a, b)
    a.flush_to_lake()
    b.catch_up_lake_end()
    with pytest.raises(CommitFailedError, match="shared lake"):
        b.truncate_to(2)
    assert sorted(lake.table_offsets(uri)) == [0, 1, 2, 3]


def test_the_log_manager_puts_tables_in_the_lake_by_topic_id_and_tails_under_log_dirs(lake, tmp_path):
    manager = LogManager(tmp_path / "logs", tail_cache_max_bytes=1 << 20, segment_files_max=None,
                         lake_uri=lake.uri + "/", lake_storage_options=lake.storage_options)
    old = manager.open_log(topic="orders", partition=1, topic_id="id-1", config=CONFIG, replicated=True)
    assert old.table_uri == f"{lake.uri}/orders-id-1/1"
    assert old.local_dir == tmp_path / "logs" / "orders-1"
    old.set_lake_leader(True)
    old.append(records(0, 3), leader_epoch=0)
    old.advance_high_watermark(3)
    old.flush_to_lake()
    old.close()
    # a re-created topic of the same name: a new table, the old one untouched
    new = manager.open_log(topic="orders", partition=1, topic_id="id-2", config=CONFIG, replicated=True)
    assert new.table_uri == f"{lake.uri}/orders-id-2/1"
    assert new.log_end_offset == 0
    assert lake.table_uris() == [f"{lake.uri}/orders-id-1/1", f"{lake.uri}/orders-id-2/1"]
    assert sorted(lake.table_offsets(f"{lake.uri}/orders-id-1/1")) == [0, 1, 2]
    # no Delta table under log.dirs: only the tail and the topic id file
    assert not (tmp_path / "logs" / "orders-1" / "_delta_log").exists()


def test_a_broker_writes_its_partitions_to_the_s3_lake(broker_factory, lake, tmp_path):
    """A real broker with lake.uri on the real object store: records produced to it are read back from the
    partition tables in the store with delta-rs alone; its log.dirs holds no table; the secret is not
    in its log."""
    from tests.cluster.test_replication import create_topic, produce

    broker = broker_factory(extra_env=lake.broker_env(), log_level="info")
    resp = create_topic(broker.url, "orders", partitions=2, rf=1, configs={"lake.commit.interval.ms": "200"})
    assert resp.status_code == 201, resp.text
    sent = {0: [f"order-{i}".encode() for i in range(10)], 1: [f"order-{i}".encode() for i in range(10, 15)]}
    for p, values in sent.items():
        resp = produce(broker.url, "orders", p, values, acks="all")
        assert resp.status_code == 200, resp.text
    topic_id = None

    def tables() -> list[str]:
        return [u for u in lake.table_uris() if u.startswith(f"{lake.uri}/orders-")]

    wait_for(lambda: len(tables()) == 2, what="the two partition tables in the lake")
    for uri in tables():
        topic_id = uri[len(f"{lake.uri}/orders-"):].rsplit("/", 1)[0]
        assert uri.rsplit("/", 1)[1] in ("0", "1")
    for p, values in sent.items():
        uri = f"{lake.uri}/orders-{topic_id}/{p}"

        def rows():
            t = DeltaTable(uri, storage_options=lake.storage_options).to_pyarrow_table(columns=["offset", "value"])
            return sorted(zip(t["offset"].to_pylist(), t["value"].to_pylist()))

        wait_for(lambda: len(rows()) == len(values), what=f"partition {p}'s records in its table")
        assert rows() == list(enumerate(values))
        assert not (tmp_path / "logs-0" / f"orders-{p}" / "_delta_log").exists()
    assert lake.store.secret_access_key not in broker.log_file.read_text()


def test_only_the_leader_applies_retention_merges_and_vacuums_the_shared_table(lake, tmp_path):
    uri = f"{lake.uri}/t-topicid/0"
    config = TopicConfig.parse({"lake.commit.interval.ms": "1000", "retention.bytes": "1",
                                "lake.vacuum.retention.ms": "0"})

    def open_replica(name: str) -> PartitionLog:
        return PartitionLog.open(topic="t", partition=0, table_uri=uri, config=config, local_dir=tmp_path / name,
                                 storage_options=lake.storage_options, initial_high_watermark=0)

    a, b = open_replica("a"), open_replica("b")
    a.set_lake_leader(True)
    for start in (0, 3, 6):  # three data files
        a.append(records(start, 3), leader_epoch=0)
        replicate(a, b)
        a.flush_to_lake()
    b.catch_up_lake_end()
    version = a.version
    now_ms = 2**40
    # the follower: no retention, no merge, no table properties, no VACUUM: the table does not move
    assert b.lifecycle.apply_retention(now_ms=now_ms) == 0
    assert b.lifecycle.merge_head(keep_newest=0, max_file_bytes=1 << 30) == 0
    assert not b.lifecycle.sync_table_properties()
    assert b.lifecycle.vacuum() == 0
    b.catch_up_lake_end()
    assert b._writer.table.version() == version and b.log_start_offset == 0
    # the leader applies retention.bytes (the oldest files go); their deletion is VACUUM's, the leader's
    assert a.lifecycle.sync_table_properties()
    assert a.lifecycle.apply_retention(now_ms=now_ms) == 2
    assert a.log_start_offset == 6 and a.version > version
    assert sorted(lake.table_offsets(uri)) == [6, 7, 8]
    b.catch_up_lake_end()
    assert b.lifecycle.vacuum() == 0
    assert a.lifecycle.vacuum() == 2


def test_a_follower_follows_the_leaders_log_start_offset_without_committing(lake, tmp_path):
    """Taking the leader's log start offset (retention, DeleteRecords) and starting over at it (a follower
    whose log ends below it) change the follower's own log only, never the shared table."""
    uri = f"{lake.uri}/t-topicid/0"
    a, b = replica(lake, uri, tmp_path / "a"), replica(lake, uri, tmp_path / "b")
    a.set_lake_leader(True)
    for start in (0, 3):
        a.append(records(start, 3), leader_epoch=0)
        replicate(a, b)
        a.flush_to_lake()
    b.catch_up_lake_end()
    version = a._writer.table.version()
    assert b.lifecycle.advance_log_start_offset(3, reason="leader") == 0
    assert b.log_start_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        b.read(0)  # below its log start offset now
    b.lifecycle.reset_to(20)
    assert (b.log_start_offset, b.log_end_offset, b.lake_end_offset) == (20, 20, 20)
    b._writer.table.update_incremental()
    assert b._writer.table.version() == version  # the table is as the leader left it
    assert sorted(lake.table_offsets(uri)) == list(range(6))
    # the follower appends from there on
    rows = records(0, 2)
    a.lifecycle.reset_to(20)  # the leader too (here by hand), so its records continue at 20
    a.append(rows, leader_epoch=0)
    replicate(a, b)
    assert b.log_end_offset == 22


def test_a_lagging_follower_takes_a_compacted_range_from_the_shared_table_without_committing(lake, tmp_path):
    uri = f"{lake.uri}/t-topicid/0"
    config = TopicConfig.parse({"lake.commit.interval.ms": "1000", "cleanup.policy": "compact"})

    def open_replica(name: str) -> PartitionLog:
        return PartitionLog.open(topic="t", partition=0, table_uri=uri, config=config, local_dir=tmp_path / name,
                                 storage_options=lake.storage_options, initial_high_watermark=0)

    a, b = open_replica("a"), open_replica("b")
    a.set_lake_leader(True)
    keyed = pa.table({"key": pa.array([b"k0", b"k1"] * 4, pa.binary()),
                      "value": pa.array([f"v{i}".encode() for i in range(8)], pa.binary())})
    a.append(keyed, leader_epoch=0)
    a.advance_high_watermark(8)
    a.flush_to_lake()
    a.lifecycle.clean(now_ms=2**40, force=True)
    assert sorted(lake.table_offsets(uri)) == [6, 7]  # the latest record per key
    version = a.version
    # the follower, still empty, fetches the compacted range: the table holds it already
    with pytest.raises(NonContiguousOffsetsError):
        b.append_replicated(with_fetched_range(a.read(0, end_offset=8, control_records=True), 0, 8))
    assert b.log_end_offset == 8 and b.lake_end_offset == 8
    b._writer.table.update_incremental()
    assert b._writer.table.version() == version
    assert b.read(6, end_offset=8)["value"].to_pylist() == [b"v6", b"v7"]


def test_lake_commit_interval_0_keeps_the_tail_in_a_shared_lake(lake, tmp_path):
    """Altering a topic to lake.commit.interval.ms=0 commits the whole tail of a local table and drops it; in
    a shared lake that would commit records above the high watermark: the tail stays."""
    uri = f"{lake.uri}/t-topicid/0"
    a = replica(lake, uri, tmp_path / "a")
    a.set_lake_leader(True)
    a.append(records(0, 4), leader_epoch=0)  # not replicated: the high watermark stays at 0
    a.update_config(TopicConfig.parse({"lake.commit.interval.ms": "0"}))
    assert a.tiered and a.lake_end_offset == 0
    assert lake.table_offsets(uri) == []
    opened = PartitionLog.open(topic="t", partition=0, table_uri=uri, local_dir=tmp_path / "b",
                               config=TopicConfig.parse({"lake.commit.interval.ms": "0"}),
                               storage_options=lake.storage_options)
    assert opened.tiered


def test_a_log_with_a_table_of_its_own_is_not_re_read_when_it_becomes_leader(tmp_path):
    """Without a lake the leader role changes nothing in the log: its tail cache survives (no re-read)."""
    log = PartitionLog.open(topic="t", partition=0, table_uri=tmp_path / "t-0", config=CONFIG)
    assert not log.shared_lake and log.local_dir == tmp_path / "t-0"
    log.append(records(0, 3), leader_epoch=0)
    log.set_lake_leader(True)
    assert not log.lake_commits_held
    assert not log._writer.lease.taken_since_last_look()
    log.set_lake_leader(False)
    assert not log.lake_commits_held  # a table of its own: a follower flushes it too


def deposed(lake, tmp_path, *, old_epoch: int, new_epoch: int) -> tuple[str, PartitionLog, PartitionLog]:
    """``(uri, old, new)``: ``old`` led in ``old_epoch`` and committed offsets 0-3 (replicated to ``new``);
    ``new`` now leads in ``new_epoch`` and recorded its epoch with an empty commit (nothing to flush)."""
    uri = f"{lake.uri}/t-topicid/0"
    old, new = replica(lake, uri, tmp_path / "old"), replica(lake, uri, tmp_path / "new")
    old.set_lake_leader(True, leader_epoch=old_epoch)
    old.append(records(0, 4), leader_epoch=old_epoch)
    replicate(old, new)
    assert old.flush_to_lake() == 4
    new.set_lake_leader(True, leader_epoch=new_epoch)
    assert new.flush_to_lake() == 0
    return uri, old, new


def test_a_deposed_leader_that_still_believes_it_leads_commits_nothing(lake, tmp_path):
    """Two replicas both believe they lead (the old one was paused through an election): the new leader
    records its epoch in the table at its first flush, with nothing to flush (an empty commit), and from
    then on every commit of the old one is refused by the conditional put; it finds the newer epoch, stops
    committing and keeps its tail. The records it took after the election never reach the table."""
    # the election: the new leader (epoch 4) records its epoch although it has nothing to flush
    uri, old, new = deposed(lake, tmp_path, old_epoch=3, new_epoch=4)
    epochs = [c.get("lakelog.leader_epoch") for c in DeltaTable(uri, storage_options=lake.storage_options).history()]
    assert epochs[0] == "4" and "3" in epochs
    # the old leader wakes up, still leading in its own view, takes records and tries to commit them:
    # refused, and fenced
    old.append(records(100, 3), leader_epoch=3)
    old.advance_high_watermark(old.log_end_offset)
    with pytest.raises(CommitFailedError):
        old.flush_to_lake()
    assert old.lake_fenced_by == 4
    assert old.flush_to_lake() == 0  # commits nothing more, whatever its tail holds
    assert old.read(4, end_offset=7)["offset"].to_pylist() == [4, 5, 6]  # its tail stays readable
    # the new leader's own records at those offsets go to the table, once
    new.append(records(4, 2), leader_epoch=4)
    new.advance_high_watermark(new.log_end_offset)
    assert new.flush_to_lake() == 2
    table = DeltaTable(uri, storage_options=lake.storage_options).to_pyarrow_table()
    assert sorted(table["offset"].to_pylist()) == list(range(6))
    assert sorted(table["value"].to_pylist()) == [f"v{i}".encode() for i in range(6)]
    # a role change in an older epoch does not lift the fence; one in the newer epoch does
    old.set_lake_leader(True, leader_epoch=3)
    assert old.lake_fenced_by == 4 and old.flush_to_lake() == 0
    old.set_lake_leader(True, leader_epoch=5)
    assert old.lake_fenced_by is None


def test_a_deposed_leader_whose_snapshot_caught_up_is_fenced_before_it_commits(lake, tmp_path):
    """The deposed leader's snapshot moved past its successor's epoch commit without a refused append (its
    own merge or VACUUM rebased onto it): its next flush reads the epochs of the versions it did not
    commit and is fenced before it appends anything."""
    uri, old, _ = deposed(lake, tmp_path, old_epoch=5, new_epoch=6)  # and the successor's epoch commit
    old._writer.table.update_incremental()  # as a rebased commit of its own would leave it
    old.append(records(100, 3), leader_epoch=5)
    old.advance_high_watermark(old.log_end_offset)
    assert old.flush_to_lake() == 0 and old.lake_fenced_by == 6
    assert sorted(lake.table_offsets(uri)) == [0, 1, 2, 3]


def test_a_deleted_topics_tables_leave_the_lake(broker_factory, lake):
    """Deleting a topic removes its partition tables from the object store (every object under them, as
    listed through the S3 API); a topic re-created with the name writes new tables."""
    import pyarrow.fs as pafs

    from lakelog.client import LakelogClient
    from tests.cluster.test_replication import create_topic, produce

    broker = broker_factory(extra_env=lake.broker_env())
    assert create_topic(broker.url, "gone", partitions=2, rf=1,
                        configs={"lake.commit.interval.ms": "200"}).status_code == 201
    for p in range(2):
        assert produce(broker.url, "gone", p, [b"a", b"b"], acks="all").status_code == 200
    store = lake.store
    fs = pafs.S3FileSystem(access_key=store.access_key_id, secret_key=store.secret_access_key, region=store.region,
                           endpoint_override=store.endpoint_url, force_virtual_addressing=False)
    prefix = lake.uri[len("s3://"):]

    def objects() -> list[str]:
        found = fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
        return [f.path for f in found if f.type == pafs.FileType.File and "/gone-" in f.path]

    wait_for(lambda: sum(p.endswith(".parquet") for p in objects()) >= 2, what="both tables' data in the lake")
    with LakelogClient(broker.url) as api:
        api.admin.delete_topic("gone")
    wait_for(lambda: objects() == [], what="the deleted topic's objects to leave the lake")
    # the name again: a new topic id, new tables
    assert create_topic(broker.url, "gone", partitions=1, rf=1,
                        configs={"lake.commit.interval.ms": "200"}).status_code == 201
    assert produce(broker.url, "gone", 0, [b"c"], acks="all").status_code == 200
    wait_for(lambda: any(p.endswith(".parquet") for p in objects()), what="the new topic's table")


def test_a_commit_cut_between_its_data_file_and_its_log_entry_is_done_again_once(lake, tmp_path):
    """The leader wrote a commit's data file to the store and died before the Delta log entry (a process
    killed half-way): after a restart it commits the same records again from its tail, readers see each
    record once (the orphan file is in no commit), and VACUUM removes the orphan."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    uri = f"{lake.uri}/t-topicid/0"
    config = TopicConfig.parse({"lake.commit.interval.ms": "1000", "lake.vacuum.retention.ms": "0"})

    def open_replica() -> PartitionLog:
        return PartitionLog.open(topic="t", partition=0, table_uri=uri, config=config, local_dir=tmp_path / "a",
                                 storage_options=lake.storage_options, initial_high_watermark=0)

    log = open_replica()
    log.set_lake_leader(True)
    log.append(records(0, 3), leader_epoch=0)
    log.advance_high_watermark(3)
    assert log.flush_to_lake() == 3
    log.append(records(3, 4), leader_epoch=0)
    log.advance_high_watermark(7)
    # half a commit: the next commit's data file is in the store, its log entry never written
    store = lake.store
    fs = pafs.S3FileSystem(access_key=store.access_key_id, secret_key=store.secret_access_key, region=store.region,
                           endpoint_override=store.endpoint_url, force_virtual_addressing=False)
    orphan = f"{uri[len('s3://'):]}/part-00000-half-done-c000.snappy.parquet"
    with fs.open_output_stream(orphan) as out:
        pq.write_table(log.read(3, end_offset=7), out)
    log.close()  # the process died here
    log = open_replica()  # the restart: the table ends at 3, the tail still holds 3..6
    log.set_lake_leader(True)
    assert log.lake_end_offset == 3 and log.log_end_offset == 7
    log.advance_high_watermark(7)
    assert log.flush_to_lake() == 4
    assert sorted(lake.table_offsets(uri)) == list(range(7))  # each once: the orphan is in no commit
    assert fs.get_file_info(orphan).type == pafs.FileType.File
    log.lifecycle.sync_table_properties()  # lake.vacuum.retention.ms=0 as the table's retention
    assert log.lifecycle.vacuum() >= 1  # a file no commit ever referenced
    assert fs.get_file_info(orphan).type == pafs.FileType.NotFound
    assert sorted(lake.table_offsets(uri)) == list(range(7))
