"""Gold against a real MariaDB 10.11 server and the embedded engine: init, export exactly
once (re-runs, appends, kill -9 at several moments), hourly partitions with an empty
``p_future``, pk_hash and JSON exactness checked with SQL on the server, rotation, vacuum,
status."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pipelines.config import load_config
from pipelines.gold import job as gold_job
from pipelines.gold.job import gold_status, run_gold, run_init, run_rotate, run_vacuum
from devtools.silver_rows import (BIG_NEGATIVE, BIG_UNSIGNED, DECIMAL_TEXT, ESCAPED_PK_TAIL,
                                  LONG_PK, RAW_DECIMAL, write_silver)

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]


@pytest.fixture
def gold_db() -> str:
    return "gold_" + uuid.uuid4().hex[:10]


def cfg_for(tmp_path: Path, mariadb, db: str, **extra):
    return load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                          "gold.dsn": mariadb.dsn(db), **extra})


def silver_path(cfg) -> str:
    return cfg.table_path("silver", "binlog_events")


def one(mariadb, db: str, sql: str, params=None):
    return mariadb.execute(sql, params, db=db)[0]


def silver_keys(spark, cfg) -> set[tuple]:
    rows = spark.read.format("delta").load(silver_path(cfg)).select(
        "source_id", "binlog_file", "start_pos", "row_in_event").collect()
    return {tuple(r) for r in rows}


def gold_keys(mariadb, db: str) -> list[tuple]:
    return [tuple(r) for r in mariadb.execute(
        "SELECT source_id, binlog_file, start_pos, row_in_event FROM binlog_events", db=db)]


def assert_exactly_once(spark, cfg, mariadb, db: str) -> None:
    gold = gold_keys(mariadb, db)
    assert len(gold) == len(set(gold)), "duplicate rows in gold"
    assert set(gold) == silver_keys(spark, cfg)


def partitions(mariadb, db: str) -> list[tuple[str, str]]:
    return [(str(n), str(d)) for n, d in mariadb.execute(
        "SELECT PARTITION_NAME, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'binlog_events' "
        "ORDER BY PARTITION_ORDINAL_POSITION", (db,))]


def assert_partitions_hourly(mariadb, db: str) -> None:
    """Every row sits in the partition named after its hour; p_future is empty; bounds are
    the next hour's TO_SECONDS."""
    parts = partitions(mariadb, db)
    assert parts[-1] == ("p_future", "MAXVALUE")
    for name, desc in parts[:-1]:
        hour = dt.datetime.strptime(name, "p_%Y%m%d%H")
        nxt = hour + dt.timedelta(hours=1)
        assert int(desc) == one(mariadb, db, "SELECT TO_SECONDS(%s)", (nxt,))[0], name
    names = [n for n, _ in parts[:-1]]
    for name in names:
        bad = one(mariadb, db, f"SELECT COUNT(*) FROM binlog_events PARTITION ({name}) WHERE "
                  "DATE_FORMAT(event_timestamp, 'p_%%Y%%m%%d%%H') <> %s", (name,))[0]
        assert bad == 0, name
    assert one(mariadb, db, "SELECT COUNT(*) FROM binlog_events PARTITION (p_future)")[0] == 0


def test_init_creates_database_and_is_idempotent(tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    first = run_init(cfg, partitions=5)
    assert first.created_database and first.partitions == 6
    create = one(mariadb, gold_db, "SHOW CREATE TABLE binlog_events")[1]
    again = run_init(cfg, partitions=5)
    assert not again.created_database and again.partitions_added == 0
    assert one(mariadb, gold_db, "SHOW CREATE TABLE binlog_events")[1] == create
    tables = {r[0] for r in mariadb.execute("SHOW TABLES", db=gold_db)}
    assert tables == {"binlog_events", "schema_snapshots", "binlake_export_state",
                      "binlake_sources", "index_state"}
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    assert [n for n, _ in partitions(mariadb, gold_db)] == \
        [f"p_{now + dt.timedelta(hours=i):%Y%m%d%H}" for i in range(5)] + ["p_future"]
    cols = [r[0] for r in mariadb.execute("SHOW COLUMNS FROM binlog_events", db=gold_db)]
    assert cols[:1] == ["event_id"] and {"pk_hash", "row_in_event", "source_id"} <= set(cols)
    keys = {(r[2], r[4]) for r in mariadb.execute("SHOW INDEX FROM binlog_events", db=gold_db)}
    assert {k for k, _ in keys} == {"PRIMARY", "uq_event_row", "idx_row_lookup", "idx_pk_hash",
                                    "idx_gtid"}


def test_export_is_exactly_once_and_hourly(spark, tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db, **{"gold.batch_rows": 700})
    write_silver(spark, silver_path(cfg), 6000, hours=9)
    run_init(cfg, partitions=2)  # fewer than the data spans: export adds the rest
    res = run_gold(spark, cfg)
    assert (res.mode, res.rows_read, res.rows_inserted) == ("full", 6000, 6000)
    assert res.pk_marked == 6 and res.partitions_added >= 9
    assert_exactly_once(spark, cfg, mariadb, gold_db)
    assert_partitions_hourly(mariadb, gold_db)
    assert one(mariadb, gold_db, "SELECT COUNT(*) FROM binlog_events "
               "WHERE NOT (pk_hash <=> SHA2(pk_values, 256))")[0] == 0

    again = run_gold(spark, cfg)
    assert (again.mode, again.rows_inserted) == ("none", 0)

    write_silver(spark, silver_path(cfg), 1500, hours=2, first_id=6000, file_no=2)
    # one data file per event_date partition: two when the two hours cross midnight UTC
    days = (spark.read.format("delta").load(silver_path(cfg))
            .where("binlog_file = 'mysql-bin.000002'").select("event_date").distinct().count())
    more = run_gold(spark, cfg)
    assert (more.mode, more.files, more.rows_read, more.rows_inserted) == (
        "incremental", days, 1500, 1500)
    assert_exactly_once(spark, cfg, mariadb, gold_db)
    assert_partitions_hourly(mariadb, gold_db)


def test_first_export_survives_a_checkpoint_landing_meanwhile(spark, tmp_path, mariadb, gold_db,
                                                               monkeypatch) -> None:
    """The first export reads silver's whole snapshot at the version it pins, for minutes on
    a big lake, while a stream may commit (it holds no silver lease). The embedded engine
    checkpoints every tenth commit and cannot then time-travel to the pinned version: the
    export reads the snapshot's data files (``delta_ops.version_files``), as incremental
    runs read theirs. A real append lands as version 10 between the export's queries."""
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    for i in range(10):  # silver versions 0..9
        write_silver(spark, silver_path(cfg), 60, hours=1, first_id=60 * i, file_no=i + 1)
    real, landed = gold_job._partitions_for, []

    def concurrent_commit(*args, **kwargs):
        out = real(*args, **kwargs)
        if not landed:  # version 10: the engine writes a checkpoint
            write_silver(spark, silver_path(cfg), 60, hours=1, first_id=600, file_no=11)
            landed.append(True)
        return out

    monkeypatch.setattr(gold_job, "_partitions_for", concurrent_commit)
    res = run_gold(spark, cfg)
    assert landed and (res.mode, res.to_version, res.rows_inserted) == ("full", 9, 600)
    more = run_gold(spark, cfg)
    assert (more.mode, more.rows_inserted) == ("incremental", 60)
    assert_exactly_once(spark, cfg, mariadb, gold_db)


def test_json_and_pk_values_are_exact_on_the_server(spark, tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    write_silver(spark, silver_path(cfg), 2000, hours=2)
    run_gold(spark, cfg)
    got = one(mariadb, gold_db, "SELECT JSON_EXTRACT(row_after, '$.big'), "
              "JSON_EXTRACT(row_after, '$.neg'), JSON_UNQUOTE(JSON_EXTRACT(row_after, '$.amount')), "
              "JSON_EXTRACT(row_after, '$.doc.raw'), JSON_UNQUOTE(JSON_EXTRACT(row_after, '$.note')) "
              "FROM binlog_events WHERE source_id = 'default' AND start_pos = 256 "
              "AND row_in_event = 0")
    assert got == (BIG_UNSIGNED, BIG_NEGATIVE, DECIMAL_TEXT, RAW_DECIMAL, 'café "q" \\ tab\t 0')
    # Every JSON text is byte-identical to silver's.
    silver = {(r["start_pos"], r["row_in_event"]): (r["row_before"], r["row_after"], r["pk_values"])
              for r in spark.read.format("delta").load(silver_path(cfg)).collect()}
    gold = {(int(s), int(i)): (b, a, p) for s, i, b, a, p in mariadb.execute(
        "SELECT start_pos, row_in_event, row_before, row_after, pk_values FROM binlog_events",
        db=gold_db)}
    assert {k: v[:2] for k, v in gold.items()} == {k: v[:2] for k, v in silver.items()}
    escaped = [k for k, v in silver.items() if v[2].endswith(ESCAPED_PK_TAIL)]
    assert escaped and all(gold[k][2] == silver[k][2] for k in escaped)
    # Over-long pk_values: marked prefix + the full value's hash (= silver's pk_hash).
    marked = mariadb.execute(
        "SELECT pk_values, RIGHT(pk_values, 64), CHAR_LENGTH(pk_values) FROM binlog_events "
        "WHERE pk_values LIKE %s", ("%\\\\#%",), db=gold_db)
    assert len(marked) == 2
    import hashlib
    for pk, digest, length in marked:
        assert length <= 512 and LONG_PK.startswith(pk[:-66])
        assert digest == hashlib.sha256(LONG_PK.encode()).hexdigest()


@pytest.mark.parametrize("method", ["bulk", "insert", "load_data"])
def test_each_method_gives_the_same_rows(spark, tmp_path, mariadb, gold_db, method) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db, **{"gold.method": method, "gold.batch_rows": 300})
    write_silver(spark, silver_path(cfg), 2000, hours=3)
    res = run_gold(spark, cfg)
    assert (res.method, res.rows_inserted) == (method, 2000)
    assert_exactly_once(spark, cfg, mariadb, gold_db)
    assert_partitions_hourly(mariadb, gold_db)
    assert run_gold(spark, cfg).rows_inserted == 0
    # a chunk written again (a re-run after a crash) is all duplicate-key no-ops
    from pipelines.gold.client import connect
    from pipelines.gold.exporter import write_chunk
    from pipelines.gold.rows import to_gold
    from pipelines.mysql.dsn import Dsn
    silver = spark.read.format("delta").load(silver_path(cfg)).limit(500).toArrow()
    gold, _ = to_gold(silver.combine_chunks().to_batches()[0])
    conn = connect(Dsn.parse(mariadb.dsn(gold_db)), autocommit=False,
                   local_infile=method == "load_data", bulk=method == "bulk")
    try:
        assert getattr(conn, "bulk_operations", False) == (method == "bulk")
        assert write_chunk(conn, gold, method) == 0
    finally:
        conn.close()
    assert_exactly_once(spark, cfg, mariadb, gold_db)



@pytest.mark.parametrize("method", ["insert", "bulk"])
def test_chunks_fit_the_servers_max_allowed_packet(spark, tmp_path, method) -> None:
    # A chunk of wide rows is more than one INSERT may carry (max_allowed_packet 1 MB here;
    # MySQL 5.7's default is 4 MB): the chunk goes as several statements (bulk commands),
    # one transaction.
    import datetime as dt

    from pyspark.sql import functions as F

    from devtools.mariadb import MariaDBServer
    from devtools.silver_rows import silver_frame
    from pipelines.gold import ddl
    from pipelines.gold.client import connect
    from pipelines.gold.exporter import statement_limit, write_chunk
    from pipelines.gold.rows import to_gold
    from pipelines.mysql.dsn import Dsn

    wide = '{"pad":"' + "x" * 100_000 + '"}'
    silver = (silver_frame(spark, 40, hours=1)
              .withColumn("row_after", F.lit(wide)).withColumn("row_before", F.lit(None))
              .toArrow())
    gold, _ = to_gold(silver.combine_chunks().to_batches()[0])
    with MariaDBServer(workdir=tmp_path / "small_packet",
                       extra_options={"max_allowed_packet": "1M"}) as server:
        server.execute("CREATE DATABASE wide")
        first = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=3)
        server.execute(ddl.create_events_sql(first.replace(minute=0, second=0, microsecond=0),
                                             24 * 4), db="wide")
        conn = connect(Dsn.parse(server.dsn("wide")), autocommit=False,
                       bulk=method == "bulk")
        try:
            assert statement_limit(conn) < 1 << 20
            assert write_chunk(conn, gold, method) == 40
        finally:
            conn.close()
        assert server.execute("SELECT COUNT(*), SUM(LENGTH(row_after)) FROM binlog_events",
                              db="wide") == [(40, 40 * len(wide))]

def test_auto_method_follows_the_server(mariadb, tmp_path) -> None:
    # MariaDB: its bulk protocol, however many tasks. Without one (MySQL): LOAD DATA holds a
    # partition's AUTO-INC lock to its end under lock mode 1, so two tasks would take turns:
    # auto then writes multi-row INSERTs; under mode 2 (MySQL 8's default), or with one
    # task, LOAD DATA. That choice is asked of MariaDB servers here, the only kind this
    # machine runs.
    from devtools.mariadb import MariaDBServer
    from pipelines.gold.client import connect
    from pipelines.gold.job import _server_method, _text_method
    from pipelines.mysql.dsn import Dsn

    def chosen(server, tasks: int, how=lambda conn, tasks: _server_method(conn, "auto", tasks)
               ) -> str:
        conn = connect(Dsn.parse(server.dsn()), database=False)
        try:
            return how(conn, tasks)
        finally:
            conn.close()

    assert (chosen(mariadb, 2), chosen(mariadb, 1)) == ("bulk", "bulk")
    assert mariadb.execute("SELECT @@GLOBAL.innodb_autoinc_lock_mode") == [(1,)]
    assert (chosen(mariadb, 2, _text_method), chosen(mariadb, 1, _text_method)) == (
        "insert", "load_data")
    with MariaDBServer(workdir=tmp_path / "mode2",
                       extra_options={"innodb_autoinc_lock_mode": 2}) as mode2:
        assert chosen(mode2, 2, _text_method) == "load_data"


def test_lost_watermark_or_recreated_silver_adds_nothing(spark, tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    write_silver(spark, silver_path(cfg), 1200, hours=2)
    run_gold(spark, cfg)
    mariadb.execute("DELETE FROM binlake_export_state", db=gold_db)
    res = run_gold(spark, cfg)
    assert (res.mode, res.rows_read, res.rows_inserted) == ("full", 1200, 0)
    write_silver(spark, silver_path(cfg), 1200, hours=2, mode="overwrite")
    res = run_gold(spark, cfg)
    assert res.rows_inserted == 0
    assert_exactly_once(spark, cfg, mariadb, gold_db)


def _killed_state(mariadb, db: str):
    try:
        return (one(mariadb, db, "SELECT COUNT(*) FROM binlog_events")[0],
                one(mariadb, db, "SELECT status FROM binlake_export_state")[0])
    except Exception as exc:  # noqa: BLE001 - killed before init: no tables yet
        return repr(exc)[:60]


# 1.0 s: the engine is starting; 2.4 s: partitions/watermark; 3.2 s and 4.5 s: tasks are
# loading; 6.0 s: around the end (measured on 2 cores; the printout says what was hit).
@pytest.mark.parametrize("delay", [1.0, 2.4, 3.2, 4.5, 6.0])
def test_kill_9_then_rerun_is_exactly_once(spark, tmp_path, mariadb, gold_db, delay) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    write_silver(spark, silver_path(cfg), 100_000, hours=12)
    env = dict(os.environ, BINLAKE_GOLD_DSN=mariadb.dsn(gold_db), BINLAKE_GOLD_BATCH_ROWS="1000")
    cmd = [sys.executable, "-m", "pipelines.gold", "--lake", str(tmp_path / "lake")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"killed after {delay}s with", _killed_state(mariadb, gold_db))
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "***" in rerun.stdout + rerun.stderr or "gold:" in rerun.stdout
    assert mariadb.dsn(gold_db).split("@")[0].split(":")[-1] not in rerun.stdout + rerun.stderr
    assert one(mariadb, gold_db, "SELECT COUNT(*) FROM binlog_events")[0] == 100_000
    assert_exactly_once(spark, cfg, mariadb, gold_db)
    assert one(mariadb, gold_db, "SELECT COUNT(*) FROM binlog_events PARTITION (p_future)")[0] == 0
    assert one(mariadb, gold_db, "SELECT silver_version, status FROM binlake_export_state") == \
        (0, "completed")


def test_rotate_drops_old_hours_silver_holds_and_keeps_the_rest(spark, tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    write_silver(spark, silver_path(cfg), 1000, hours=10)  # the 10 hours before this one
    run_gold(spark, cfg)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    # A row silver does not hold, 8 hours ago: its hour must survive.
    orphan_hour = now - dt.timedelta(hours=8)
    mariadb.execute(
        "INSERT INTO binlog_events (source_id, binlog_file, start_pos, end_pos, row_in_event, "
        "event_timestamp, schema_name, table_name, event_type, pk_values) VALUES "
        "('bintrail', 'mysql-bin.000009', 4, 100, 0, %s, 'shop', 'orders', 1, '1')",
        (orphan_hour + dt.timedelta(minutes=5),), db=gold_db)
    before = one(mariadb, gold_db, "SELECT COUNT(*) FROM binlog_events")[0]
    res = run_rotate(spark, cfg, retain="5h", add_future=3)
    expected = [f"p_{now - dt.timedelta(hours=h):%Y%m%d%H}" for h in range(10, 5, -1)
                if h != 8]
    assert res.dropped == expected
    assert [k["partition"] for k in res.kept] == [f"p_{orphan_hour:%Y%m%d%H}"]
    names = [n for n, _ in partitions(mariadb, gold_db)]
    assert f"p_{orphan_hour:%Y%m%d%H}" in names and not set(expected) & set(names)
    assert f"p_{now + dt.timedelta(hours=3):%Y%m%d%H}" in names
    after = one(mariadb, gold_db, "SELECT COUNT(*) FROM binlog_events")[0]
    gone = spark.read.format("delta").load(silver_path(cfg)).where(
        f"cast(event_timestamp as bigint) < {int((now - dt.timedelta(hours=5) - dt.datetime(1970, 1, 1)).total_seconds())}"
        f" AND NOT (cast(event_timestamp as bigint) >= {int((orphan_hour - dt.datetime(1970, 1, 1)).total_seconds())}"
        f" AND cast(event_timestamp as bigint) < {int((orphan_hour + dt.timedelta(hours=1) - dt.datetime(1970, 1, 1)).total_seconds())})"
    ).count()
    assert before - after == gone
    # A full re-export (watermark lost) does not bring rotated hours back.
    mariadb.execute("UPDATE binlake_export_state SET silver_version = -1", db=gold_db)
    res2 = run_gold(spark, cfg)
    assert res2.rows_inserted == 0
    assert one(mariadb, gold_db, "SELECT COUNT(*) FROM binlog_events")[0] == after
    # Idempotent: nothing more to drop.
    assert run_rotate(spark, cfg, retain="5h", add_future=3).dropped == []


def test_vacuum_sets_retention_and_silver_stays_usable(spark, tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db, **{"gold.log_retention": "interval 60 days"})
    write_silver(spark, silver_path(cfg), 300, hours=2)
    write_silver(spark, silver_path(cfg), 300, hours=2, mode="overwrite")
    out = run_vacuum(cfg)
    assert [t["table"] for t in out] == ["silver/binlog_events"]
    assert out[0]["properties"] == {"delta.logRetentionDuration": "interval 60 days",
                                    "delta.deletedFileRetentionDuration": "interval 7 days"}
    assert out[0]["files_removed"] == 0  # the overwritten files are younger than 7 days
    write_silver(spark, silver_path(cfg), 300, hours=2, first_id=300, file_no=2)
    assert spark.read.format("delta").load(silver_path(cfg)).count() == 600
    assert spark.read.format("delta").option("versionAsOf", 0).load(silver_path(cfg)).count() == 300


def test_status_reports_watermark_lag_and_partitions(spark, tmp_path, mariadb, gold_db) -> None:
    cfg = cfg_for(tmp_path, mariadb, gold_db)
    assert gold_status(load_config(env={}))["configured"] is False
    write_silver(spark, silver_path(cfg), 500, hours=3)
    run_gold(spark, cfg)
    write_silver(spark, silver_path(cfg), 100, hours=1, first_id=500, file_no=2)
    st = gold_status(cfg)
    assert st["watermark"]["silver_version"] == 0 and st["silver_version"] == 1
    assert st["lag_versions"] == 1
    assert st["p_future_estimated_rows"] == 0 and st["partitions"][-1]["name"] == "p_future"
    assert "***" in st["dsn"] and mariadb.dsn().split("@")[0].split(":")[-1] not in repr(st)
    down = load_config(env={}, overrides={"gold.dsn": "mysql://u:secret@127.0.0.1:1/x"})
    st = gold_status(down)
    assert "error" in st and "secret" not in repr(st)
