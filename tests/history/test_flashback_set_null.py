"""Flashback of parent deletes and key updates under ON DELETE / ON UPDATE SET NULL and
ON UPDATE CASCADE, applied with ``--apply``.

MariaDB's InnoDB changes the children's FK columns itself and logs only the parents' changes.
Flashing them back must also set the children's FK columns back: SET NULL children from their
last images in silver, ON UPDATE CASCADE children by the target's own cascade when the undo
changes the parent key back. Truth is the server's SELECT.
"""

from __future__ import annotations

import time

import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.history.flashback import plan_flashback
from pipelines.history.selection import Selection
from pipelines.history.times import parse_gtid_set
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables
from tests.history.test_flashback_cascade import (_create_and_snapshot, _gtid, _index_window,
                                          _run)

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

TABLES = ["sn.parent", "sn.kid", "sn.pet", "sn.other"]
DDL = [
    "DROP DATABASE IF EXISTS sn", "CREATE DATABASE sn",
    "CREATE TABLE sn.parent (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=InnoDB",
    # SET NULL on both rules; the FK column is not the last column.
    "CREATE TABLE sn.kid (id INT PRIMARY KEY, parent_id INT NULL, note VARCHAR(20), "
    " amount DECIMAL(8,2), FOREIGN KEY (parent_id) REFERENCES sn.parent (id) "
    " ON DELETE SET NULL ON UPDATE SET NULL) ENGINE=InnoDB",
    # ON UPDATE CASCADE (deleting a referenced parent is refused).
    "CREATE TABLE sn.pet (id INT PRIMARY KEY, owner INT NOT NULL, tag BINARY(4), "
    " FOREIGN KEY (owner) REFERENCES sn.parent (id) ON UPDATE CASCADE) ENGINE=InnoDB",
    "CREATE TABLE sn.other (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
]


def test_flashback_restores_set_null_and_update_cascade_children(spark, tmp_path, capsys):
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        dsn = server.dsn()
        with server.connect() as conn:
            _create_and_snapshot(spark, cfg, conn, dsn, DDL, "sn")
            _run(conn,
                 "INSERT INTO sn.parent VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four')",
                 "INSERT INTO sn.kid VALUES (10, 1, 'a', 1.50), (11, 1, NULL, 2.00), "
                 "(20, 2, 'b', -0.10), (30, 3, 'c', 0), (40, NULL, 'd', 9.99)",
                 "INSERT INTO sn.pet VALUES (200, 2, X'00FF'), (201, 2, 'ab'), (300, 3, NULL)",
                 "UPDATE sn.kid SET note = 'moved', parent_id = 2 WHERE id = 11",
                 "INSERT INTO sn.other VALUES (1, 1), (2, 2)")
            truth = server_tables(conn, TABLES)
            time.sleep(1.1)
            g_a = _gtid(conn)
            _run(conn, "DELETE FROM sn.parent WHERE id = 1",  # kid 10 → NULL
                 "UPDATE sn.parent SET id = 22, name = 'two!' WHERE id = 2",  # kids 11, 20 → NULL; pets → 22
                 "UPDATE sn.parent SET name = 'bad' WHERE id = 3",  # key unchanged: no cascade
                 "DELETE FROM sn.other WHERE id = 1")
            g_b = _gtid(conn)
            after = server_tables(conn, TABLES)
            assert after["sn.kid"] != truth["sn.kid"] and after["sn.pet"] != truth["sn.pet"]
            gtids = _index_window(spark, cfg, server, tmp_path, g_a, g_b)
            sel = Selection(gtids=parse_gtid_set(gtids))
            off = plan_flashback(spark, cfg, sel, cascade=False)
            assert any("--no-cascade" in w for w in off.warnings)
            on = plan_flashback(spark, cfg, sel)
            assert on.statements == off.statements + 3  # kids 10, 11, 20 set back
            assert not any("not restored" in w for w in on.warnings)
            assert main(["--lake", cfg.lake.root, "flashback", "--gtid", gtids, "--apply",
                         "--target-dsn", dsn]) == 0
            out = capsys.readouterr().out
            assert "4 transaction(s) applied, 0 rolled back" in out
            assert server_tables(conn, TABLES) == truth
            # The SET NULL undo matches its child only while it equals its last image with
            # the FK column NULL: a row changed since rolls the whole undo back.
            _run(conn, "DELETE FROM sn.parent WHERE id = 1",  # kid 10 → NULL again
                 "UPDATE sn.kid SET note = 'later' WHERE id = 10")
            before_retry = server_tables(conn, TABLES)
            assert main(["--lake", cfg.lake.root, "flashback", "--gtid", gtids.split(",")[0],
                         "--apply", "--target-dsn", dsn]) == 1
            out = capsys.readouterr().out
            assert "0 transaction(s) applied, 1 rolled back" in out and "sn.kid" in out
            assert server_tables(conn, TABLES) == before_retry
