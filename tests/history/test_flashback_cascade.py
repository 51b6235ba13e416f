"""Flashback of parent deletes under ON DELETE CASCADE, applied with ``--apply``.

MariaDB's InnoDB removes the children (and grandchildren) itself and logs only the parents'
DELETEs. Flashing the deletes back must also bring the children back, from their last images
in silver, using the FK rules recorded by the snapshot. Truth is the server's SELECT.
"""

from __future__ import annotations

import time

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.history.flashback import plan_flashback
from pipelines.history.selection import Selection
from pipelines.history.times import parse_gtid_set
from pipelines.silver.job import run_silver
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import save_snapshot
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

TABLES = ["fk.parent", "fk.child", "fk.grandchild", "fk.other"]
DDL = [
    "DROP DATABASE IF EXISTS fk", "CREATE DATABASE fk",
    "CREATE TABLE fk.parent (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE fk.child (id INT PRIMARY KEY, parent_id INT NOT NULL, note VARCHAR(20), "
    " amount DECIMAL(8,2), FOREIGN KEY (parent_id) REFERENCES fk.parent (id) "
    " ON DELETE CASCADE) ENGINE=InnoDB",
    "CREATE TABLE fk.grandchild (id INT PRIMARY KEY, child_id INT NOT NULL, tag BINARY(4), "
    " FOREIGN KEY (child_id) REFERENCES fk.child (id) ON DELETE CASCADE) ENGINE=InnoDB",
    "CREATE TABLE fk.other (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
]


def _run(conn, *statements) -> None:
    with conn.cursor() as cur:
        for s in statements:
            cur.execute(s)


def _gtid(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        return cur.fetchone()[0]


def _create_and_snapshot(spark, cfg, conn, dsn: str, ddl: list[str], schema: str) -> list:
    """Run ``ddl``, take and store the schema snapshot (FK rules included); its checks."""
    _run(conn, *ddl)
    snapshot, checks = take_snapshot(Dsn.parse(dsn), source_id=cfg.source.name, schemas=[schema])
    save_snapshot(spark, cfg, snapshot, checks)
    return checks


def _index_window(spark, cfg, server, tmp_path, g_a: str, g_b: str) -> str:
    """Index the server's closed binlogs into bronze and silver; the GTIDs after ``g_a`` up to
    ``g_b`` as a ``--gtid`` list."""
    binlogs = tmp_path / "binlogs"
    server.copy_closed_binlogs(binlogs)
    assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
    run_silver(spark, cfg)
    first, last = int(g_a.split("-")[2]) + 1, int(g_b.split("-")[2])
    return ",".join(f"0-1-{n}" for n in range(first, last + 1))


def test_flashback_of_parent_deletes_restores_cascaded_children(spark, tmp_path, capsys):
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        dsn = server.dsn()
        with server.connect() as conn:
            checks = _create_and_snapshot(spark, cfg, conn, dsn, DDL, "fk")
            assert any(c.name == "fk_cascade" and c.level == "warn" for c in checks)
            _run(conn,
                 "INSERT INTO fk.parent VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four')",
                 "INSERT INTO fk.child VALUES (10, 1, 'a', 1.50), (11, 1, NULL, 2.00), "
                 "(20, 2, 'b', -0.10), (30, 3, 'c', 0), (40, 4, 'd', 9.99)",
                 "INSERT INTO fk.grandchild VALUES (100, 10, X'00FF'), (101, 11, 'ab'), "
                 "(200, 20, NULL), (300, 30, X'01000000')",
                 "UPDATE fk.child SET note = 'moved', parent_id = 2 WHERE id = 11",
                 "INSERT INTO fk.other VALUES (1, 1), (2, 2)")
            truth = server_tables(conn, TABLES)
            # The CLI's `snapshot --data` (a baseline; here only its report is checked).
            assert main(["--lake", str(tmp_path / "lake_data"), "snapshot", "--data",
                         "--source-dsn", dsn, "--schemas", "fk"]) == 0
            out = capsys.readouterr().out
            assert "15 row(s) of 4 table(s)" in out and Dsn.parse(dsn).password not in out
            time.sleep(1.1)
            g_a = _gtid(conn)
            _run(conn, "DELETE FROM fk.parent WHERE id IN (1, 2)",
                 "UPDATE fk.parent SET name = 'bad' WHERE id = 3",
                 "DELETE FROM fk.other WHERE id = 1")
            g_b = _gtid(conn)
            after = server_tables(conn, TABLES)
            assert after["fk.child"] != truth["fk.child"]  # the cascade removed children
            gtids = _index_window(spark, cfg, server, tmp_path, g_a, g_b)
            off = plan_flashback(spark, cfg, Selection(gtids=parse_gtid_set(gtids)),
                                 cascade=False)
            assert any("--no-cascade" in w for w in off.warnings)
            on = plan_flashback(spark, cfg, Selection(gtids=parse_gtid_set(gtids)))
            assert on.statements == off.statements + 6  # children 10, 11, 20; grandchildren 100, 101, 200
            assert main(["--lake", cfg.lake.root, "flashback", "--gtid", gtids,
                         "--dry-run"]) == 0
            out = capsys.readouterr().out
            assert "0 conflict(s)" in out
            assert main(["--lake", cfg.lake.root, "flashback", "--gtid", gtids, "--apply",
                         "--target-dsn", dsn]) == 0
            out = capsys.readouterr().out
            assert "3 transaction(s) applied, 0 rolled back" in out
            assert server_tables(conn, TABLES) == truth
            # Applying again: every statement finds its row changed, all rolled back, exit 1.
            assert main(["--lake", cfg.lake.root, "flashback", "--gtid", gtids, "--apply",
                         "--target-dsn", dsn]) == 1
            out = capsys.readouterr().out
            assert "0 transaction(s) applied, 3 rolled back" in out
            assert server_tables(conn, TABLES) == truth
