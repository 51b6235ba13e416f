"""bintrail's read commands against binlake's gold (issue 43), as the SQL they run.

bintrail itself could not be built here (the Go module proxy answers 403 for
github.com/dbtrail/bintrail), so its readers' statements are copied below as facts from its
source (github.com/dbtrail/bintrail: ``internal/query/query.go`` buildQuery, the
``internal/metadata`` resolver ``recover`` opens, ``internal/status`` LoadIndexState /
LoadPartitionStats / LoadCoverage) with the Go types they scan into, and run against a gold
database filled by ``binlake snapshot``, ``binlake index`` and ``binlake gold`` from a real
MariaDB; then the same statements against a database laid out as bintrail lays it out
(its DDL, copied) holding the same row changes as its indexer writes them (one writer in
binlog order, ``pk_values NOT NULL``, JSON ``null`` changed_columns, a ``_ci`` collation)
give the same answers, key by key (index_state: the files, status and counts; gold has no
file sizes). Also: a gold database laid out as binlake made it before (text snapshot ids and
``schema_version``, AUTO_INCREMENT ``event_id``) is migrated in place by ``binlake init``,
twice without change the second time.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest

from devtools.mariadb import MariaDBServer
from pipelines.binlog.names import file_number
from pipelines.gold.event_ids import FIRST_ID
from tests.gold.test_event_order import BINTRAIL_PK_QUERY, _binlake, _workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

# recover → metadata.NewResolver(db, 0): the latest snapshot, scanned into a Go int, then its
# columns (is_generated scanned into a bool).
LATEST_SNAPSHOT = "SELECT COALESCE(MAX(snapshot_id), 0) FROM schema_snapshots"
SNAPSHOT_COLUMNS = (
    "SELECT schema_name, table_name, column_name, ordinal_position, column_key, data_type, "
    "COALESCE(column_type, '') AS column_type, is_generated FROM schema_snapshots "
    "WHERE snapshot_id = %s ORDER BY schema_name, table_name, ordinal_position")
# status → LoadIndexState (binlog_file string, status string, events_indexed int64,
# file_size int64, last_position int64, started_at time, completed_at NullTime,
# error_message / bintrail_id NullString), LoadPartitionStats, LoadCoverage's first query.
INDEX_STATE = ("SELECT binlog_file, status, events_indexed, file_size, last_position, "
               "started_at, completed_at, error_message, bintrail_id FROM index_state "
               "ORDER BY bintrail_id, started_at, binlog_file")
PARTITION_STATS = (
    "SELECT PARTITION_NAME, IFNULL(PARTITION_DESCRIPTION, ''), PARTITION_ORDINAL_POSITION, "
    "COALESCE(TABLE_ROWS, 0) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = %s "
    "AND TABLE_NAME = 'binlog_events' ORDER BY PARTITION_ORDINAL_POSITION")
COVERAGE = "SELECT MIN(event_timestamp), MAX(event_timestamp), COUNT(*) FROM binlog_events"
# query/recover with --since/--until (buildQuery: a TO_SECONDS literal for pruning plus the
# exact bound), schema and table; MySQL's TO_SECONDS('1970-01-01') = 62167219200.
_TO_SECONDS_EPOCH = 62167219200
WINDOW_QUERY = (
    "SELECT be.event_id, be.event_timestamp, be.event_type, be.pk_values, be.schema_version "
    "FROM binlog_events AS be JOIN (SELECT event_id, event_timestamp FROM binlog_events "
    "WHERE schema_name = %s AND table_name = %s AND TO_SECONDS(event_timestamp) >= {lo} AND "
    "event_timestamp >= %s AND TO_SECONDS(event_timestamp) < {hi} AND event_timestamp <= %s) "
    "AS k ON be.event_id = k.event_id AND be.event_timestamp = k.event_timestamp")


def _to_seconds(t: dt.datetime) -> int:
    return int((t - dt.datetime(1970, 1, 1)).total_seconds()) + _TO_SECONDS_EPOCH


def _uint32(v) -> int | None:
    """What Go's database/sql does scanning into a uint32: an integer in range, or fails."""
    if v is None:
        return None
    assert isinstance(v, int) and 0 <= v < 2**32, v
    return v


def test_bintrail_readers_sql_on_binlake_gold(spark, mariadb, tmp_path: Path,
                                              monkeypatch) -> None:
    monkeypatch.setenv("BINLAKE_GOLD_PARALLELISM", "2")
    db = "gold_bt_" + uuid.uuid4().hex[:8]
    lake, binlogs = str(tmp_path / "lake"), tmp_path / "binlogs"
    with MariaDBServer() as source:
        with source.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.products (id INT PRIMARY KEY, qty INT NOT NULL, "
                        "note VARCHAR(40))")
        _binlake("--lake", lake, "snapshot", "--source-dsn", source.dsn(), "--schemas", "shop")
        _workload(source, 1, 400)
        source.copy_closed_binlogs(binlogs)
        _binlake("--lake", lake, "index", "--binlog-dir", str(binlogs), "--all")
        _binlake("--lake", lake, "gold", "--gold-dsn", mariadb.dsn(db))

    def q(sql, params=None):
        return mariadb.execute(sql, params, db=db)

    # Types bintrail scans into integers are integer columns.
    types = dict(q("SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME), COLUMN_TYPE FROM "
                   "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s", (db,)))
    assert types["binlog_events.schema_version"] == "int(10) unsigned"
    assert types["binlog_events.connection_id"] == "int(10) unsigned"
    assert types["schema_snapshots.snapshot_id"] == "int(10) unsigned"

    # recover's resolver: the latest snapshot is an integer naming shop.products' columns.
    (latest,), = q(LATEST_SNAPSHOT)
    # the server sends text; Go's Scan into an int parses it (a DECIMAL here, as it is on
    # bintrail's own INT UNSIGNED column: COALESCE with a signed 0)
    assert str(latest).isdigit() and int(latest) >= 1
    latest = int(latest)
    cols = q(SNAPSHOT_COLUMNS, (latest,))
    assert [(r[2], r[4], r[5]) for r in cols if r[1] == "products"] == [
        ("id", "PRI", "int"), ("qty", "", "int"), ("note", "", "varchar")]
    assert all(int(r[7]) in (0, 1) for r in cols)
    # every row names that snapshot; binlake's own id is kept beside it
    assert q("SELECT DISTINCT schema_version FROM binlog_events") == [(latest,)]
    (silver_id,), = q("SELECT DISTINCT binlake_snapshot_id FROM schema_snapshots "
                      "WHERE snapshot_id = %s", (latest,))
    assert silver_id and not silver_id.isdigit()

    # query --pk: every key's history in binlog order, values of bintrail's scan types.
    total = 0
    for key in ("1", "2", "228", "399", "400"):
        rows = sorted(q(BINTRAIL_PK_QUERY, ("shop", "products", key, key)),
                      key=lambda r: (r[4], r[0]))
        assert [int(r[9]) for r in rows] == ([1, 2, 2] if int(key) % 2 else
                                             [1, 2, 3, 1, 2]), key
        coords = [(file_number(r[1]), int(r[2])) for r in rows]
        assert coords == sorted(coords)
        for r in rows:
            assert isinstance(r[0], int) and r[0] >= FIRST_ID
            assert _uint32(r[14]) == latest and _uint32(r[6]) is None  # MariaDB: no thread id
        total += len(rows)
    assert total == 2 * 3 + 3 * 5

    # recover --since/--until over the table: the same rows as gold holds for it.
    lo_t, hi_t = q("SELECT MIN(event_timestamp), MAX(event_timestamp) FROM binlog_events")[0]
    lo = _to_seconds(lo_t.replace(minute=0, second=0))
    hi = _to_seconds(hi_t.replace(minute=0, second=0) + dt.timedelta(hours=1))
    window = q(WINDOW_QUERY.format(lo=lo, hi=hi), ("shop", "products", lo_t, hi_t))
    assert len(window) == q("SELECT COUNT(*) FROM binlog_events")[0][0] == 400 * 4

    # status: index_state per binlog file, true to what gold holds; partitions; coverage.
    state = q(INDEX_STATE)
    per_file = dict(q("SELECT binlog_file, COUNT(*) FROM binlog_events GROUP BY binlog_file"))
    assert {r[0]: int(r[2]) for r in state} == {f: int(n) for f, n in per_file.items()}
    last = dict(q("SELECT binlog_file, MAX(end_pos) FROM binlog_events GROUP BY binlog_file"))
    for f, status, _, size, pos, started, completed, err, bid in state:
        assert status == "completed" and int(pos) == int(size) == int(last[f])
        assert isinstance(started, dt.datetime) and completed >= started
        assert err is None and bid is None
    parts = q(PARTITION_STATS, (db,))
    assert parts[-1][:2] == ("p_future", "MAXVALUE") and all(int(p[3]) >= 0 for p in parts)
    assert q(COVERAGE)[0][2] == 400 * 4

    # The same answers from a table laid out as bintrail lays it out, filled as its indexer
    # fills it (one writer in binlog order: AUTO_INCREMENT ids; pk_values NOT NULL, JSON
    # null changed_columns for INSERT/DELETE, the server's default collation).
    bt = _bintrail_layout(mariadb, db)

    def answers(database: str) -> list:
        out = []
        for key in [str(k) for k in range(1, 401)]:
            rows = sorted(mariadb.execute(BINTRAIL_PK_QUERY, ("shop", "products", key, key),
                                          db=database), key=lambda r: (r[4], r[0]))
            out.append([(r[1:6], r[7:11], _json(r[11]), _json(r[12]), _json(r[13]), r[14])
                        for r in rows])
        (snap,), = mariadb.execute(LATEST_SNAPSHOT, db=database)
        out.append(mariadb.execute(SNAPSHOT_COLUMNS, (int(snap),), db=database))
        window = mariadb.execute(WINDOW_QUERY.format(lo=lo, hi=hi),
                                 ("shop", "products", lo_t, hi_t), db=database)
        out.append([r[1:] for r in sorted(window, key=lambda r: (r[1], r[0]))])
        out.append(sorted((f, st, int(n)) for f, st, n, *_ in
                          mariadb.execute(INDEX_STATE, db=database)))
        return out

    assert answers(db) == answers(bt)


# bintrail's tables (internal/indexer/schema.go: binlog_events with dbtrail's three later
# columns, schema_snapshots, index_state), facts copied; the database's default collation.
_BT_EVENTS = """CREATE TABLE binlog_events (
    event_id BIGINT UNSIGNED AUTO_INCREMENT, binlog_file VARCHAR(255) NOT NULL,
    start_pos BIGINT UNSIGNED NOT NULL, end_pos BIGINT UNSIGNED NOT NULL,
    event_timestamp DATETIME NOT NULL, gtid VARCHAR(255) DEFAULT NULL,
    connection_id INT UNSIGNED DEFAULT NULL, schema_name VARCHAR(64) NOT NULL,
    table_name VARCHAR(64) NOT NULL, event_type TINYINT UNSIGNED NOT NULL,
    pk_values VARCHAR(512) NOT NULL, pk_hash VARCHAR(64) AS (SHA2(pk_values, 256)) STORED,
    changed_columns JSON DEFAULT NULL, row_before JSON DEFAULT NULL, row_after JSON DEFAULT NULL,
    schema_version INT UNSIGNED NOT NULL DEFAULT 0, query_text MEDIUMTEXT DEFAULT NULL,
    query_hash CHAR(64) DEFAULT NULL, commit_ts_us BIGINT UNSIGNED DEFAULT NULL,
    PRIMARY KEY (event_id, event_timestamp),
    INDEX idx_row_lookup (schema_name, table_name, event_timestamp),
    INDEX idx_pk_hash (schema_name, table_name, pk_hash, event_timestamp),
    INDEX idx_gtid (gtid)
) ENGINE=InnoDB PARTITION BY RANGE (TO_SECONDS(event_timestamp)) (
    PARTITION p_future VALUES LESS THAN MAXVALUE)"""
_BT_SNAPSHOTS = """CREATE TABLE schema_snapshots (
    id INT UNSIGNED AUTO_INCREMENT PRIMARY KEY, snapshot_id INT UNSIGNED NOT NULL,
    snapshot_time DATETIME NOT NULL, schema_name VARCHAR(64) NOT NULL,
    table_name VARCHAR(64) NOT NULL, column_name VARCHAR(64) NOT NULL,
    ordinal_position INT UNSIGNED NOT NULL, column_key VARCHAR(3) NOT NULL,
    data_type VARCHAR(64) NOT NULL, column_type TEXT DEFAULT NULL,
    is_nullable VARCHAR(3) NOT NULL, column_default TEXT DEFAULT NULL,
    is_generated TINYINT(1) NOT NULL DEFAULT 0, pg_type_oid INT UNSIGNED DEFAULT NULL,
    pg_type_mod INT DEFAULT NULL, INDEX idx_snapshot_id (snapshot_id),
    INDEX idx_snapshot_table (snapshot_id, schema_name, table_name)) ENGINE=InnoDB"""
_BT_INDEX_STATE = """CREATE TABLE index_state (
    binlog_file VARCHAR(255) PRIMARY KEY, file_size BIGINT UNSIGNED NOT NULL,
    last_position BIGINT UNSIGNED NOT NULL, events_indexed BIGINT UNSIGNED NOT NULL DEFAULT 0,
    status ENUM('in_progress','completed','failed') NOT NULL, started_at DATETIME NOT NULL,
    completed_at DATETIME DEFAULT NULL, error_message TEXT DEFAULT NULL,
    bintrail_id CHAR(36) NULL DEFAULT NULL, INDEX idx_bintrail_id (bintrail_id)) ENGINE=InnoDB"""
_BT_COLUMNS = ("binlog_file, start_pos, end_pos, event_timestamp, gtid, connection_id, "
               "schema_name, table_name, event_type, pk_values, changed_columns, row_before, "
               "row_after, schema_version, query_text, query_hash, commit_ts_us")


def _bintrail_layout(mariadb, gold: str) -> str:
    """A database laid out as bintrail lays it out, holding gold's row changes as bintrail's
    indexer writes them: in binlog order (its AUTO_INCREMENT ids), its value forms."""
    bt = gold + "_bt"
    mariadb.execute(f"CREATE DATABASE {bt} DEFAULT CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci")
    for ddl_text in (_BT_EVENTS, _BT_SNAPSHOTS, _BT_INDEX_STATE):
        mariadb.execute(ddl_text, db=bt)
    select = _BT_COLUMNS.replace("pk_values", "COALESCE(pk_values, '')").replace(
        "changed_columns", "COALESCE(changed_columns, 'null')")
    mariadb.execute(f"INSERT INTO {bt}.binlog_events ({_BT_COLUMNS}) SELECT {select} FROM "
                    f"{gold}.binlog_events ORDER BY CAST(SUBSTRING_INDEX(binlog_file, '.', -1) "
                    "AS UNSIGNED), start_pos, row_in_event")
    cols = ("snapshot_id, snapshot_time, schema_name, table_name, column_name, ordinal_position, "
            "column_key, data_type, column_type, is_nullable, column_default, is_generated")
    mariadb.execute(f"INSERT INTO {bt}.schema_snapshots ({cols}) SELECT {cols} FROM "
                    f"{gold}.schema_snapshots ORDER BY id")
    mariadb.execute(f"INSERT INTO {bt}.index_state (binlog_file, file_size, last_position, "
                    "events_indexed, status, started_at, completed_at) SELECT binlog_file, 0, 0, "
                    f"COUNT(*), 'completed', NOW(), NOW() FROM {gold}.binlog_events "
                    "GROUP BY binlog_file")
    return bt


def _json(text):
    import json

    return None if text is None else json.loads(text)


# The gold tables as binlake made them before issue 43 (pipelines/gold/ddl.py at aa1bf18):
# text snapshot ids and schema_version, AUTO_INCREMENT event_id.
_OLD_SNAPSHOTS = """CREATE TABLE schema_snapshots (
    id INT UNSIGNED AUTO_INCREMENT PRIMARY KEY, snapshot_id VARCHAR(64) NOT NULL,
    snapshot_time DATETIME NOT NULL, source_id VARCHAR(64) NOT NULL DEFAULT 'default',
    schema_name VARCHAR(64) NOT NULL, table_name VARCHAR(64) NOT NULL,
    column_name VARCHAR(64) NOT NULL, ordinal_position INT UNSIGNED NOT NULL,
    column_key VARCHAR(3) NOT NULL, data_type VARCHAR(64) NOT NULL, column_type TEXT,
    is_nullable VARCHAR(3) NOT NULL, column_default TEXT,
    is_generated TINYINT(1) NOT NULL DEFAULT 0, pg_type_oid INT UNSIGNED, pg_type_mod INT,
    UNIQUE KEY uq_snapshot_column (source_id, snapshot_id, schema_name, table_name, column_name),
    INDEX idx_snapshot_id (snapshot_id), INDEX idx_snapshot_table (snapshot_id, schema_name, table_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""


def test_init_migrates_an_older_gold_in_place(mariadb, tmp_path: Path) -> None:
    from pipelines.config import load_config
    from pipelines.gold import ddl
    from pipelines.gold.event_ids import event_id
    from pipelines.gold.job import run_init

    db = "gold_old_" + uuid.uuid4().hex[:8]
    mariadb.execute(f"CREATE DATABASE {db}")
    hour = dt.datetime(2026, 12, 1, 10)
    mariadb.execute(ddl.create_events_sql(hour, 2), db=db)
    mariadb.execute("ALTER TABLE binlog_events MODIFY schema_version VARCHAR(64) NOT NULL "
                    "DEFAULT '0', MODIFY connection_id BIGINT UNSIGNED DEFAULT NULL", db=db)
    mariadb.execute(_OLD_SNAPSHOTS, db=db)
    for sid, when in (("20261201T101500Z-bbbb", "2026-12-01 10:15:00"),
                      ("20261201T100000Z-aaaa", "2026-12-01 10:00:00")):
        mariadb.execute("INSERT INTO schema_snapshots (snapshot_id, snapshot_time, schema_name, "
                        "table_name, column_name, ordinal_position, column_key, data_type, "
                        "is_nullable) VALUES (%s, %s, 'shop', 't', 'id', 1, 'PRI', 'int', 'NO')",
                        (sid, when), db=db)
    # rows with AUTO_INCREMENT ids in the order two tasks wrote them (not binlog order)
    for pos, row, version in ((500, 1, "20261201T101500Z-bbbb"), (4, 0, "binlog"),
                              (500, 0, "20261201T101500Z-bbbb"),
                              (200, 0, "20261201T100000Z-aaaa")):
        mariadb.execute("INSERT INTO binlog_events (source_id, binlog_file, start_pos, end_pos, "
                        "row_in_event, event_timestamp, schema_name, table_name, event_type, "
                        "pk_values, schema_version) VALUES ('default', 'mariadb-bin.000003', %s, "
                        "%s, %s, '2026-12-01 10:30:00', 'shop', 't', 1, '1', %s)",
                        (pos, pos + 90, row, version), db=db)
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                         "gold.dsn": mariadb.dsn(db)})
    for _ in range(2):  # the second init finds nothing to do
        run_init(cfg, partitions=2)
        types = dict(mariadb.execute(
            "SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME), COLUMN_TYPE FROM "
            "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s", (db,)))
        assert types["binlog_events.schema_version"] == "int(10) unsigned"
        assert types["binlog_events.connection_id"] == "int(10) unsigned"
        assert types["schema_snapshots.snapshot_id"] == "int(10) unsigned"
        assert mariadb.execute("SELECT binlake_snapshot_id, snapshot_id FROM schema_snapshots "
                               "ORDER BY snapshot_id", db=db) == [
            ("20261201T100000Z-aaaa", 1), ("20261201T101500Z-bbbb", 2)]
        rows = mariadb.execute("SELECT event_id, start_pos, end_pos, row_in_event, "
                               "schema_version FROM binlog_events ORDER BY event_id", db=db)
        assert [(int(p), int(r), int(v)) for _, p, _, r, v in rows] == [
            (4, 0, 0), (200, 0, 1), (500, 0, 2), (500, 1, 2)]
        assert [int(i) for i, *_ in rows] == [
            event_id(1, "mariadb-bin.000003", int(p), int(e), int(r)) for _, p, e, r, _ in rows]
    assert mariadb.execute("SELECT source_number, source_id FROM binlake_sources",
                           db=db) == [(1, "default")]
