"""Snapshots of real MariaDB servers, checked against what the server itself says
(SHOW FULL COLUMNS, SHOW CREATE TABLE, SELECT of enum/set labels, SHOW MASTER STATUS), and
their round trips through JSON and Delta."""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import replace

import pytest

from pipelines.config import Config, LakeConfig, SourceConfig
from pipelines.mysql.dsn import Dsn
from pipelines.errors import ConfigError, SourceError
from pipelines.silver.charsets import decode_text
from pipelines.silver.snapshot_job import print_summary, run_snapshot
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import (
    export_json, fks_path, import_json, load_checks, load_export, load_snapshots,
    save_snapshot, snapshots_path,
)
from pipelines.lake.delta_ops import table_exists
from devtools.mariadb import MariaDBServer

pytestmark = [pytest.mark.mariadb]

SCHEMA = [
    "CREATE DATABASE snap",
    "CREATE DATABASE other",
    """CREATE TABLE snap.types (
        c_tinyint tinyint, c_tinyint_u tinyint unsigned, c_smallint smallint,
        c_mediumint mediumint unsigned, c_int int(10) unsigned zerofill,
        c_bigint bigint unsigned, c_decimal decimal(65,30), c_float float, c_double double,
        c_bit bit(13), c_year year, c_date date, c_time time(3), c_datetime datetime(6),
        c_timestamp timestamp(2) NULL DEFAULT NULL,
        c_char char(5) CHARACTER SET latin1,
        c_varchar varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT 'x|y',
        c_text text CHARACTER SET utf8mb3, c_binary binary(4), c_varbinary varbinary(10),
        c_blob blob, c_longblob longblob,
        c_enum enum('a','b''c','d,e','f\\\\g','') DEFAULT 'a',
        c_set set('x','y''','z\\\\'),
        c_json json, c_geometry geometry,
        c_gen int AS (c_tinyint + 1) STORED,
        id int NOT NULL,
        PRIMARY KEY (id)
    )""",
    "CREATE TABLE snap.line (a int NOT NULL, b varchar(10), c int NOT NULL, PRIMARY KEY (c, a))",
    """CREATE TABLE snap.child (id int PRIMARY KEY, p_c int, p_a int,
        CONSTRAINT fk_line FOREIGN KEY (p_c, p_a) REFERENCES snap.line (c, a)
        ON DELETE CASCADE ON UPDATE SET NULL)""",
    "CREATE TABLE snap.nopk (u int NOT NULL, v text, UNIQUE KEY (u))",
    "CREATE VIEW snap.v AS SELECT id FROM snap.types",
    "CREATE TABLE other.t (id int PRIMARY KEY)",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # A private tmpdir: information_schema queries spill to temporary Aria files, which a
    # shared /tmp being cleaned under the server breaks.
    tmpdir = tmp_path_factory.mktemp("mariadb-tmp")
    with MariaDBServer(binlog_row_metadata="FULL", server_id=11,
                       extra_options={"tmpdir": str(tmpdir)}) as srv:
        for sql in SCHEMA:
            srv.execute(sql)
        yield srv


@pytest.fixture(scope="module")
def taken(server):
    return take_snapshot(Dsn.parse(server.dsn()), source_id="src", schemas=["snap"])


@pytest.fixture()
def cfg(tmp_path) -> Config:
    return Config(lake=LakeConfig(root=str(tmp_path / "lake")), source=SourceConfig(name="src"))


def _create(server, table: str) -> str:
    return server.execute(f"SHOW CREATE TABLE snap.{table}")[0][1]


def test_tables_are_base_tables_of_the_named_schemas(taken):
    snap, _ = taken
    assert sorted(snap.tables) == [("snap", "child"), ("snap", "line"), ("snap", "nopk"),
                                   ("snap", "types")]


@pytest.mark.parametrize("table", ["types", "line", "child", "nopk"])
def test_columns_match_show_full_columns(server, taken, table):
    snap, _ = taken
    shown = server.execute(f"SHOW FULL COLUMNS FROM snap.{table}")
    got = snap.table("snap", table).columns
    assert [c.name for c in got] == [r[0] for r in shown]
    for c, (field, type_, collation, null, key, _default, extra, *_rest) in zip(got, shown):
        assert c.column_type == type_, field
        assert c.collation == collation, field
        assert c.charset == (collation.split("_")[0] if collation else None), field
        assert c.nullable == (null == "YES"), field
        assert c.column_key == key, field
        assert c.generated == ("GENERATED" in extra.upper()), field
    assert [c.ordinal for c in got] == list(range(1, len(got) + 1))


def test_every_type_reads_as_declared(taken):
    t = taken[0].table("snap", "types")
    c = {col.name: col for col in t.columns}
    assert c["c_int"].unsigned and c["c_int"].zerofill
    assert c["c_bigint"].unsigned and not c["c_tinyint"].unsigned
    assert c["c_decimal"].column_type == "decimal(65,30)"
    assert (c["c_time"].fsp, c["c_datetime"].fsp, c["c_timestamp"].fsp, c["c_date"].fsp) == (3, 6, 2, None)
    assert c["c_char"].charset == "latin1" and c["c_text"].charset == "utf8mb3"
    assert c["c_varchar"].default == "'x|y'"  # MariaDB quotes literal defaults
    assert c["c_geometry"].data_type == "geometry"


def test_primary_keys_match_show_create_table(server, taken):
    snap, _ = taken
    for table in ("types", "line", "child"):
        m = re.search(r"PRIMARY KEY \(([^)]*)\)", _create(server, table))
        assert snap.table("snap", table).primary_key == re.findall(r"`([^`]+)`", m.group(1))
    line = snap.table("snap", "line")
    assert line.primary_key == ["c", "a"] and line.pk_columns == ["a", "c"]


def test_unique_not_null_is_not_a_primary_key(server, taken):
    nopk = taken[0].table("snap", "nopk")
    assert "PRIMARY KEY" not in _create(server, "nopk")
    assert nopk.column("u").column_key == "PRI"  # what the server shows...
    assert nopk.primary_key == [] and nopk.pk_kind == "all_columns"  # ...is not a PK


def test_json_column_is_the_json_valid_check(server, taken):
    ddl = _create(server, "types")
    checked = set(re.findall(r"CHECK \(json_valid\(`([^`]+)`\)\)", ddl))
    assert checked == {"c_json"}
    cols = taken[0].table("snap", "types").columns
    assert {c.name for c in cols if c.is_json} == checked
    assert taken[0].table("snap", "types").column("c_json").data_type == "longtext"


def test_enum_and_set_labels_are_what_the_server_returns(server, taken):
    t = taken[0].table("snap", "types")
    labels = t.column("c_enum").enum_values
    members = t.column("c_set").set_values
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("CREATE TEMPORARY TABLE snap.tmp LIKE snap.types")
            for i in range(1, len(labels) + 1):
                cur.execute("INSERT INTO snap.tmp (id, c_enum, c_set) VALUES (%s, %s, %s)",
                            (i, i, 1 << ((i - 1) % len(members))))
            cur.execute("SELECT c_enum, c_set FROM snap.tmp ORDER BY id")
            rows = cur.fetchall()
    finally:
        conn.close()
    assert [r[0] for r in rows] == labels == ["a", "b'c", "d,e", "f\\g", ""]
    assert [r[1] for r in rows[: len(members)]] == members == ["x", "y'", "z\\"]


def test_foreign_keys_match_show_create_table(server, taken):
    snap, checks = taken
    ddl = _create(server, "child")
    m = re.search(r"CONSTRAINT `(\w+)` FOREIGN KEY \(([^)]*)\) REFERENCES `(\w+)` \(([^)]*)\)"
                  r" ON DELETE (\w+(?: \w+)?) ON UPDATE (\w+(?: \w+)?)", ddl)
    assert m, ddl
    name, cols, ref, refcols, on_delete, on_update = m.groups()
    fks = [f for f in snap.fks if f.constraint_name == name]
    assert [f.column_name for f in fks] == re.findall(r"`([^`]+)`", cols)
    assert [f.referenced_column_name for f in fks] == re.findall(r"`([^`]+)`", refcols)
    assert {(f.referenced_table_schema, f.referenced_table_name, f.delete_rule, f.update_rule)
            for f in fks} == {("snap", ref, on_delete, on_update)}
    assert [f.ordinal_position for f in fks] == [1, 2]


def test_coordinates_and_identity_are_the_servers(server, taken):
    snap, _ = taken
    file, pos = server.execute("SHOW MASTER STATUS")[0][:2]
    assert (snap.binlog_file, snap.binlog_pos) == (file, pos)  # nothing written since
    assert snap.gtid_executed == server.execute("SELECT @@gtid_binlog_pos")[0][0]
    assert snap.server_id == 11 and snap.server_uuid is None
    assert snap.server_version == server.version()


def test_checks_on_a_good_server(taken):
    checks = {c.name: c for c in taken[1]}
    assert {n: checks[n].level for n in ("log_bin", "binlog_format", "binlog_row_image",
                                         "binlog_row_metadata")} == dict.fromkeys(
        ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata"), "ok")
    assert checks["fk_cascade"].level == "warn"
    assert "snap.child.fk_line (ON DELETE CASCADE ON UPDATE SET NULL)" in checks["fk_cascade"].detail
    assert checks["primary_key"].level == "warn" and "snap.nopk" in checks["primary_key"].detail
    assert "binlog_row_value_options" not in checks  # MySQL-only variable


def test_default_excludes_system_schemas(server):
    snap, _ = take_snapshot(Dsn.parse(server.dsn()), source_id="src")
    assert {s for s, _ in snap.tables} == {"snap", "other"}
    mysql, _ = take_snapshot(Dsn.parse(server.dsn()), source_id="src", schemas=["mysql"])
    assert ("mysql", "user") in mysql.tables or ("mysql", "global_priv") in mysql.tables


def test_latin1_decoding_matches_the_server(server):
    text = server.execute("SELECT CONVERT(_latin1 %s USING utf8mb4)", (bytes(range(256)),))[0][0]
    assert decode_text(bytes(range(256)), "latin1") == text


def test_ddl_during_snapshots_never_mixes_epochs(server):
    """A writer creates tables and inserts rows while snapshots are taken: every snapshot's
    tables are exactly those whose CREATE TABLE lies before its binlog position."""
    server.execute("CREATE DATABASE race")
    server.execute("CREATE TABLE race.rows (id int AUTO_INCREMENT PRIMARY KEY)")
    stop = threading.Event()

    def writer():
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                for i in range(400):
                    if stop.is_set():
                        break
                    cur.execute(f"CREATE TABLE race.t{i} (id int PRIMARY KEY)" if i % 5 == 0
                                else "INSERT INTO race.rows VALUES ()")
                    time.sleep(0.004)
        finally:
            conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    taken = []
    try:
        for _ in range(15):
            try:
                taken.append(take_snapshot(Dsn.parse(server.dsn()), source_id="r",
                                           schemas=["race"])[0])
            except SourceError as exc:
                assert "kept moving" in str(exc)
    finally:
        stop.set()
        thread.join()
    assert taken
    for snap in taken:
        events = server.execute(f"SHOW BINLOG EVENTS IN '{snap.binlog_file}'")
        created = {m.group(1) for _f, pos, etype, _s, _e, info in events
                   if pos < snap.binlog_pos and etype == "Query"
                   for m in [re.search(r"CREATE TABLE race\.(\w+)", info)] if m}
        assert {t for _, t in snap.tables} == created


def test_minimal_metadata_and_statement_format(tmp_path):
    (tmp_path / "mariadb-tmp").mkdir()
    with MariaDBServer(binlog_row_metadata="MINIMAL",
                       extra_options={"binlog-format": "STATEMENT",
                                      "tmpdir": str(tmp_path / "mariadb-tmp")}) as srv:
        srv.execute("CREATE DATABASE s")
        srv.execute("CREATE TABLE s.t (id int PRIMARY KEY)")
        snap, checks = take_snapshot(Dsn.parse(srv.dsn()), source_id="x")
        by = {c.name: c for c in checks}
        assert by["binlog_row_metadata"].level == "warn"
        assert "MINIMAL" in by["binlog_row_metadata"].detail
        assert "snapshots" in by["binlog_row_metadata"].detail
        assert by["binlog_format"].level == "refuse" and "STATEMENT" in by["binlog_format"].detail
        cfg = Config(lake=LakeConfig(root=str(tmp_path / "lake")))
        with pytest.raises(SourceError, match="binlog_format"):
            run_snapshot(None, cfg, source_dsn=srv.dsn(), schemas=None,
                         export_path=str(tmp_path / "x.json"))
        assert not (tmp_path / "x.json").exists() and not (tmp_path / "lake").exists()


# -- errors ----------------------------------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_names_host_port_not_password():
    port = _closed_port()
    dsn = Dsn.parse(f"mysql://root:Sup3rSecretPw@127.0.0.1:{port}/")
    with pytest.raises(SourceError) as info:
        take_snapshot(dsn, source_id="x")
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "Sup3rSecretPw" not in str(info.value) and info.value.__cause__ is None


def test_wrong_password_names_host_port_not_password(server):
    dsn = replace(Dsn.parse(server.dsn()), password="WrongPassword123")
    with pytest.raises(SourceError) as info:
        take_snapshot(dsn, source_id="x")
    assert f"127.0.0.1:{server.port}" in str(info.value)
    assert "WrongPassword123" not in str(info.value)


def test_no_dsn_is_a_config_error(cfg):
    with pytest.raises(ConfigError, match="--source-dsn"):
        run_snapshot(None, cfg)


# -- export / import -------------------------------------------------------------------------

def test_export_import_round_trip(taken, tmp_path):
    snap, checks = taken
    path = str(tmp_path / "snap.json")
    export_json(snap, path, checks)
    assert import_json(path) == snap
    assert load_export(path) == (snap, checks)


@pytest.mark.parametrize("content,message", [
    ("{not json", "not JSON"),
    ('{"format": "other"}', "not a binlake schema snapshot"),
    ('{"format": "binlake-schema-snapshot", "version": 99}', "unsupported version"),
    ('{"format": "binlake-schema-snapshot", "version": 1, "snapshot": {}}', "missing"),
])
def test_bad_import_names_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as info:
        import_json(str(path))
    assert str(path) in str(info.value)


def test_missing_import_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        import_json(str(tmp_path / "nope.json"))


# -- Delta -----------------------------------------------------------------------------------

@pytest.mark.spark
def test_save_load_round_trip(spark, cfg, server, taken):
    snap, checks = taken
    assert save_snapshot(spark, cfg, snap, checks) is True
    assert save_snapshot(spark, cfg, snap, checks) is False  # already stored
    assert load_snapshots(spark, cfg) == [snap]
    assert load_snapshots(spark, cfg, source_id="elsewhere") == []
    assert sorted((c for _, c in load_checks(spark, cfg, snap.snapshot_id)), key=repr) == \
        sorted(checks, key=repr)
    rows = spark.read.format("delta").load(snapshots_path(cfg)).count()
    assert rows == snap.column_count
    assert spark.read.format("delta").load(fks_path(cfg)).count() == len(snap.fks)

    server.execute("ALTER TABLE snap.line ADD COLUMN d datetime(6)")
    later, later_checks = run_snapshot(spark, cfg, source_dsn=server.dsn(), schemas=["snap"])
    server.execute("ALTER TABLE snap.line DROP COLUMN d")
    loaded = load_snapshots(spark, cfg, source_id="src")
    assert [s.snapshot_id for s in loaded] == [snap.snapshot_id, later.snapshot_id]
    assert loaded[1] == later and loaded[1].coordinate > loaded[0].coordinate
    assert loaded[1].table("snap", "line").column_names == ["a", "b", "c", "d"]


@pytest.mark.spark
def test_import_stores_under_this_lakes_source(spark, cfg, taken, tmp_path, capsys):
    snap, checks = taken
    path = str(tmp_path / "e.json")
    export_json(replace(snap, source_id="remote-name"), path, checks)
    got, got_checks = run_snapshot(spark, cfg, import_path=path)
    assert got.source_id == "src" and got_checks == checks
    assert load_snapshots(spark, cfg) == [got]
    print_summary(got, got_checks, cfg=cfg)
    out = capsys.readouterr().out
    assert snap.snapshot_id in out
    assert f"4 tables, {snap.column_count} columns, 1 fk constraints" in out
    assert "check WARN   fk_cascade" in out


@pytest.mark.spark
def test_empty_snapshot_survives_delta(spark, cfg, taken):
    empty = replace(taken[0], snapshot_id="empty-1", tables={}, fks=[])
    save_snapshot(spark, cfg, empty)
    assert load_snapshots(spark, cfg) == [empty]
    assert table_exists(spark, fks_path(cfg))


def test_row_changes_during_the_read_do_not_force_retries(server):
    """Without DDL, a moving binlog is fine: the read is accepted at its first coordinates."""
    server.execute("CREATE DATABASE IF NOT EXISTS dml")
    server.execute("CREATE TABLE dml.rows (id int AUTO_INCREMENT PRIMARY KEY)")
    stop = threading.Event()

    def writer():
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("INSERT INTO dml.rows VALUES ()")
        finally:
            conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        snaps = [take_snapshot(Dsn.parse(server.dsn()), source_id="d", schemas=["dml"])[0]
                 for _ in range(8)]
    finally:
        stop.set()
        thread.join()
    end_file, end_pos = server.execute("SHOW MASTER STATUS")[0][:2]
    assert all(s.tables.keys() == {("dml", "rows")} for s in snaps)
    assert all(s.binlog_file == end_file and s.binlog_pos < end_pos for s in snaps)
    assert len({s.binlog_pos for s in snaps}) > 1
