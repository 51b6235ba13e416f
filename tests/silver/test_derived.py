"""Issue 41 §1: silver holds the row changes the server made without logging them.

A real MariaDB runs FK chains two levels deep (ON DELETE CASCADE / SET NULL, ON UPDATE
CASCADE / SET NULL), TRUNCATE TABLE then re-inserts of the same keys, with the schema
snapshot (FK rules included) taken at creation. After ``binlake index``, folding silver per
table equals the server's SELECT; ``reconstruct`` at a moment in the middle equals the
SELECT of that moment; ``binlake mirror``'s current tables equal the final SELECT; a second
``binlake silver`` adds no row.
"""

from __future__ import annotations

import json

import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.history.reconstruct import Point, reconstruct
from pipelines.mirror.job import mirror_path
from pipelines.mysql.dsn import Dsn
from pipelines.silver.job import run_silver
from pipelines.silver.naming import position_key
from devtools.mariadb import MariaDBServer
from tests.support.replay import replay_silver, server_tables, table_columns
from tests.history.test_flashback_cascade import _create_and_snapshot, _run

pytestmark = [pytest.mark.spark]

TABLES = ["dr.gp", "dr.par", "dr.kid", "dr.nul", "dr.log"]
DDL = [
    "DROP DATABASE IF EXISTS dr", "CREATE DATABASE dr",
    "CREATE TABLE dr.gp (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB",
    "CREATE TABLE dr.par (id INT PRIMARY KEY, gp_id INT NULL, name VARCHAR(20), "
    " FOREIGN KEY (gp_id) REFERENCES dr.gp (id) ON DELETE CASCADE ON UPDATE CASCADE) "
    "ENGINE=InnoDB",
    # level 2 under par: CASCADE on delete, SET NULL on update
    "CREATE TABLE dr.kid (id INT PRIMARY KEY, note VARCHAR(20), par_id INT NULL, "
    " FOREIGN KEY (par_id) REFERENCES dr.par (id) ON DELETE CASCADE ON UPDATE SET NULL) "
    "ENGINE=InnoDB",
    # level 2 under par: SET NULL on delete, CASCADE on update
    "CREATE TABLE dr.nul (id INT PRIMARY KEY, par_id INT NULL, v INT, "
    " FOREIGN KEY (par_id) REFERENCES dr.par (id) ON DELETE SET NULL ON UPDATE CASCADE) "
    "ENGINE=InnoDB",
    "CREATE TABLE dr.log (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB",
]
SETUP = [
    "INSERT INTO dr.gp VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    "INSERT INTO dr.par VALUES (10, 1, 'a'), (11, 1, 'b'), (20, 2, 'c'), (30, 3, 'd')",
    "INSERT INTO dr.kid VALUES (100, 'x', 10), (101, 'y', 10), (110, 'z', 11), "
    "(200, 'w', 20), (300, 'v', 30)",
    "INSERT INTO dr.nul VALUES (1000, 10, 1), (1001, 20, 2), (1002, 30, 3), (1003, NULL, 4)",
    "INSERT INTO dr.log VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')",
]
FIRST = [
    "DELETE FROM dr.gp WHERE id = 1",  # par 10, 11 → kid 100, 101, 110 gone; nul 1000 NULL
    "UPDATE dr.gp SET id = 22 WHERE id = 2",  # par 20.gp_id → 22 (its key unchanged)
    "UPDATE dr.par SET id = 33 WHERE id = 30",  # kid 300.par_id → NULL; nul 1002 → 33
    "TRUNCATE TABLE dr.log",
    "INSERT INTO dr.log VALUES (1, 'again'), (2, 'b2')",
    "UPDATE dr.log SET v = 'later' WHERE id = 2",
]
SECOND = [
    "TRUNCATE TABLE dr.log",  # flashed back at the end
    "DELETE FROM dr.par WHERE id = 20",  # kid 200 gone, nul 1001 NULL
    "INSERT INTO dr.par VALUES (40, 3, 'e')",
    "INSERT INTO dr.kid VALUES (400, 'u', 40)",
    # par 33 (gp 3) and 40 → gp_id 4: 33's gp_id was never logged as 3 → 4
    "UPDATE dr.gp SET id = 4 WHERE id = 3",
    # par 33, 40 (found by their derived images) gone: kid 400 gone, nul 1002 NULL
    "DELETE FROM dr.gp WHERE id = 4",
    "INSERT INTO dr.log VALUES (2, 'third'), (7, 'g')",
    # the server fills the existing rows (2, 7) with the defaults, unlogged
    "ALTER TABLE dr.log ADD COLUMN w INT NOT NULL DEFAULT 7, "
    " ADD COLUMN src VARCHAR(10) DEFAULT 'w''eb' AFTER id",
    "INSERT INTO dr.log (id, v, w) VALUES (8, 'h', 1)",
    "UPDATE dr.log SET w = 9 WHERE id = 7",
]


def _position(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return position_key(file, pos)


def _gtid_after(conn, statement: str) -> str:
    """Run ``statement``; the GTID it was logged with."""
    with conn.cursor() as cur:
        cur.execute(statement)
        cur.execute("SELECT @@gtid_binlog_pos")
        return cur.fetchone()[0]


def _silver(spark, cfg) -> list[dict]:
    return [r.asDict() for r in spark.read.format("delta")
            .load(cfg.table_path("silver", "binlog_events")).collect()]


def _reconstructed(spark, cfg, cols: list[dict], table: str, cutoff: int) -> list[tuple]:
    from tests.support.replay import _row

    schema, name = table.split(".")
    rec = reconstruct(spark, cfg, schema, name, Point(cutoff, f"pos {cutoff}"))
    images = [json.loads(r["image"]) for r in rec.images.collect()]
    return sorted((_row(cols, i) for i in images), key=repr)


def _mirror(spark, cfg, table: str, columns: list[str]) -> list[tuple]:
    rows = spark.read.format("delta").load(mirror_path(cfg, "current", *table.split(".")))
    return sorted(tuple(r[c] for c in columns) for r in rows.collect())


@pytest.mark.mariadb
def test_cascades_and_truncate_are_rows_of_silver(spark, tmp_path):
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            _create_and_snapshot(spark, cfg, conn, server.dsn(), DDL, "dr")
            _run(conn, *SETUP, *FIRST)
            middle, middle_rows = _position(conn), server_tables(conn, TABLES)
            middle_cols = {t: table_columns(conn, *t.split(".")) for t in TABLES}
            g_truncate = _gtid_after(conn, SECOND[0])
            _run(conn, *SECOND[1:])
            truth = server_tables(conn, TABLES)
            server.copy_closed_binlogs(binlogs)
            # quality passes: derived rows keep the image/schema column counts
            assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0
            silver = _silver(spark, cfg)
            assert replay_silver(silver, conn, TABLES) == truth
            derived = [r for r in silver if r.get("origin") not in (None, "binlog")]
            origins = sorted({r["origin"] for r in derived})
            assert origins == ["ddl", "fk_cascade", "fk_set_null", "truncate"]
            keys = [(r["binlog_file"], r["start_pos"], r["row_in_event"]) for r in silver]
            assert len(keys) == len(set(keys))
            cols = {t: table_columns(conn, *t.split(".")) for t in TABLES}
            for table in TABLES:
                assert _reconstructed(spark, cfg, middle_cols[table], table, middle) \
                    == middle_rows[table], table
                assert _reconstructed(spark, cfg, cols[table], table, 1 << 62) \
                    == truth[table], table
            # exactly once: a second run adds nothing
            assert run_silver(spark, cfg).appended == 0
            assert len(_silver(spark, cfg)) == len(silver)
            assert main(["--lake", lake, "mirror"]) == 0
            assert _mirror(spark, cfg, "dr.par", ["id", "gp_id", "name"]) == sorted(
                (r[0], r[1], r[2]) for r in _plain(conn, "SELECT id, gp_id, name FROM dr.par"))
            for table, cols in [("dr.kid", ["id", "note", "par_id"]),
                                ("dr.nul", ["id", "par_id", "v"]),
                                ("dr.log", ["id", "src", "v", "w"]),
                                ("dr.gp", ["id", "name"])]:
                # w, added after the snapshot, is typed as its JSON text (docs/mirror.md)
                sql = ", ".join(f"CAST({c} AS CHAR)" if c == "w" else c for c in cols)
                want = _plain(conn, f"SELECT {sql} FROM {table}")
                assert _mirror(spark, cfg, table, cols) == sorted(want), table
            # flashback of the TRUNCATE re-inserts its rows; key 2, inserted again since,
            # is a conflict left out
            main(["--lake", lake, "flashback", "--gtid", g_truncate, "--apply",
                  "--target-dsn", server.dsn()])
            assert _plain(conn, "SELECT id, v FROM dr.log ORDER BY id") == [
                (1, "again"), (2, "third"), (7, "g"), (8, "h")]


def _plain(conn, sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


@pytest.mark.mariadb
def test_unknown_fk_rules_are_flagged_not_guessed(spark, tmp_path, caplog):
    """No snapshot: the CREATE TABLE in bronze declares ON DELETE CASCADE, so the child's
    rules exist but are unknown: nothing is derived, and reconstruct, flashback and mirror
    say so (issue 41 §2). A snapshot taken after indexing then names them: silver derives
    the cascade of the files it already holds."""
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            _run(conn, *DDL[:4], "INSERT INTO dr.gp VALUES (1, 'one')",
                 "INSERT INTO dr.par VALUES (10, 1, 'a')", "DELETE FROM dr.gp WHERE id = 1")
            server.copy_closed_binlogs(binlogs)
            assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) in (0, 1)
            truth = _plain(conn, "SELECT id, gp_id, name FROM dr.par")
        _flagged(spark, cfg, lake, caplog)
        # A snapshot taken later names the rules: the next silver run derives the files it
        # holds again (their rules were unknown), and a run after that adds nothing.
        from pipelines.source.schema import take_snapshot
        from pipelines.silver.snapshot_store import save_snapshot

        snapshot, checks = take_snapshot(Dsn.parse(server.dsn()), source_id=cfg.source.name,
                                         schemas=["dr"])
        save_snapshot(spark, cfg, snapshot, checks)
    res = run_silver(spark, cfg)
    derived = [r for r in _silver(spark, cfg) if r["origin"] != "binlog"]
    assert res.appended == 1 and [(r["table_name"], r["event_type"], r["origin"])
                                  for r in derived] == [("par", "DELETE", "fk_cascade")]
    rec = reconstruct(spark, cfg, "dr", "par", Point(1 << 62, "now"))
    assert rec.warnings == [] and rec.images.count() == len(truth) == 0
    assert run_silver(spark, cfg).appended == 0
    assert len([r for r in _silver(spark, cfg) if r["origin"] != "binlog"]) == 1


def _flagged(spark, cfg, lake: str, caplog) -> None:
    from pipelines.history.flashback import plan_flashback
    from pipelines.history.selection import Selection
    from pipelines.mirror.job import run_mirror

    silver = _silver(spark, cfg)
    assert all(r["origin"] == "binlog" for r in silver)  # nothing guessed
    rec = reconstruct(spark, cfg, "dr", "par", Point(1 << 62, "now"))
    assert len(rec.warnings) == 1 and "dr.par: its ON DELETE/ON UPDATE rules are unknown" \
        in rec.warnings[0]
    assert reconstruct(spark, cfg, "dr", "gp", Point(1 << 62, "now")).warnings == []
    plan = plan_flashback(spark, cfg, Selection(table=("dr", "gp")))
    assert any("dr.par: its ON DELETE/ON UPDATE rules are unknown" in w for w in plan.warnings)
    with caplog.at_level("WARNING"):
        run_mirror(spark, cfg)
    assert "dr.par: its ON DELETE/ON UPDATE rules are unknown" in caplog.text
    from pipelines.quality import run_quality
    from pipelines.quality.result import summary_line

    res = run_quality(spark, cfg)
    assert "(FK rules unknown in some schema epoch: dr.par)" in summary_line(res)
    html = open(res.report_path, encoding="utf-8").read()
    assert "<h2>Not known</h2>" in html and "dr.par: its ON DELETE" in html


def test_a_mysql_57_cascade_without_snapshot_is_flagged(spark, tmp_path):
    """The corpus' one binlog with a cascading FK (MySQL 5.7.32: ``rooms`` ON DELETE CASCADE
    to ``buildings``) logs the parent's DELETE only; without a snapshot its rules are
    unknown (and, MySQL 5.7 logging no column names, its rows wait in quarantine): the gap
    names rooms from its CREATE TABLE on."""
    import shutil
    from pathlib import Path

    corpus = Path(__file__).resolve().parents[3] / "shared" / "corpus"
    src = corpus / "zalora__binlog-parser" / "data__gtid-fixtures__mysql-bin.01"
    if not src.exists():
        pytest.skip("no ../shared/corpus")
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    shutil.copy(src, binlogs / "mysql-bin.000001")
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) in (0, 1)
    from pipelines.silver.derived import load_fk_gaps

    gaps = load_fk_gaps(spark, cfg)
    # from its CREATE TABLE on (after a DROP TABLE IF EXISTS)
    assert [(g.schema, g.table) for g in gaps] == [("test_db", "rooms")]
    assert gaps[0].opened_at.startswith("mysql-bin.000001:") and gaps[0].end == 1 << 63


@pytest.mark.mariadb
def test_partition_drops_are_derived_key_partitions_flagged(spark, tmp_path):
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            _run(conn, "DROP DATABASE IF EXISTS pt", "CREATE DATABASE pt",
                 "CREATE TABLE pt.t (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                 "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
                 "CREATE TABLE pt.k (id INT PRIMARY KEY) PARTITION BY KEY (id) PARTITIONS 2",
                 "INSERT INTO pt.t VALUES (1, 1), (2, 2), (11, 11), (12, 12)",
                 "INSERT INTO pt.k VALUES (1), (2), (3)",
                 "ALTER TABLE pt.t TRUNCATE PARTITION ALL",
                 "INSERT INTO pt.t VALUES (3, 3), (13, 13)")
            after_truncate = _position(conn)
            _run(conn, "ALTER TABLE pt.t DROP PARTITION p0", "INSERT INTO pt.t VALUES (4, 4)",
                 "ALTER TABLE pt.t TRUNCATE PARTITION p1")
            after_drop = _position(conn)
            _run(conn, "INSERT INTO pt.t VALUES (5, 5)", "ALTER TABLE pt.k TRUNCATE PARTITION p0")
            server.copy_closed_binlogs(binlogs)
            assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0
            silver = _silver(spark, cfg)
            # TRUNCATE PARTITION ALL: the four; DROP PARTITION p0: 3 (p1 then holds every
            # id, so TRUNCATE PARTITION p1 removes 13 and 4)
            assert sorted(r["pk_values"] for r in silver if r["origin"] == "partition") == [
                "1", "11", "12", "13", "2", "3", "4"]
            cols = table_columns(conn, "pt", "t")
            assert _reconstructed(spark, cfg, cols, "pt.t", after_truncate) == [(13, 13), (3, 3)]
            assert _reconstructed(spark, cfg, cols, "pt.t", after_drop) == []
            with conn.cursor() as cur:
                cur.execute("SELECT id, v FROM pt.t")
                assert _reconstructed(spark, cfg, cols, "pt.t", 1 << 62) == list(cur.fetchall())
            rec = reconstruct(spark, cfg, "pt", "t", Point(1 << 62, "now"))
            assert rec.warnings == []
            # KEY partitioning: the server's own hash places the rows: not derived, said
            rec = reconstruct(spark, cfg, "pt", "k", Point(1 << 62, "now"))
            assert [w.split(" at ")[0] for w in rec.warnings] == ["pt.k: TRUNCATE PARTITION p0"]


