"""Derived row changes on the JVM engines: an ON DELETE CASCADE, an ADD COLUMN's fill, a
TRUNCATE and a DROP PARTITION on a real MariaDB, indexed by local JVM Spark with delta-spark
and by the JVM Spark Connect server; silver replayed per table equals the server's SELECT
(the fold runs in the engine's Python workers: ``mapInArrow``), and a re-run adds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.mariadb import MariaDBServer
from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.silver.job import run_silver
from tests.history.test_flashback_cascade import _create_and_snapshot, _run
from tests.support.jvm_session import delta_spark  # noqa: F401 - fixture
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture
from tests.support.replay import replay_silver, server_tables

pytestmark = [pytest.mark.mariadb]

TABLES = ["dj.p", "dj.c", "dj.s", "dj.r"]


@pytest.mark.classic
def test_derived_rows_on_jvm_spark(jvm_spark, tmp_path: Path) -> None:  # noqa: F811
    _derived_rows_replay(jvm_spark, tmp_path)


def test_derived_rows_over_spark_connect(delta_spark, tmp_path: Path) -> None:  # noqa: F811
    _derived_rows_replay(delta_spark, tmp_path)


def _derived_rows_replay(spark, tmp_path: Path) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            _create_and_snapshot(spark, cfg, conn, server.dsn(), [
                "CREATE DATABASE dj",
                "CREATE TABLE dj.p (id INT PRIMARY KEY) ENGINE=InnoDB",
                "CREATE TABLE dj.c (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) "
                "REFERENCES dj.p (id) ON DELETE CASCADE) ENGINE=InnoDB",
                "CREATE TABLE dj.s (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
                "CREATE TABLE dj.r (id INT PRIMARY KEY) PARTITION BY RANGE (id) "
                "(PARTITION a VALUES LESS THAN (10), PARTITION b VALUES LESS THAN MAXVALUE)"],
                "dj")
            _run(conn, "INSERT INTO dj.p VALUES (1), (2), (3)",
                 "INSERT INTO dj.c VALUES (1, 1), (2, 1), (3, 2), (4, 3)",
                 "DELETE FROM dj.p WHERE id = 1",
                 "INSERT INTO dj.s VALUES (1, 1), (2, 2)",
                 "ALTER TABLE dj.s ADD COLUMN d DECIMAL(5,2) NOT NULL DEFAULT 2.5",
                 "INSERT INTO dj.s (id, v) VALUES (3, 3)",
                 "TRUNCATE TABLE dj.s", "INSERT INTO dj.s (id, v) VALUES (4, 4)",
                 "UPDATE dj.s SET d = 1 WHERE id = 4",
                 "INSERT INTO dj.r VALUES (1), (2), (11), (12)",
                 "ALTER TABLE dj.r DROP PARTITION a")
            binlogs = tmp_path / "binlogs"
            server.copy_closed_binlogs(binlogs)
            assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
            run_silver(spark, cfg)
            silver = [r.asDict() for r in spark.read.format("delta")
                      .load(cfg.table_path("silver", "binlog_events")).collect()]
            derived = sorted((r["table_name"], r["origin"], r["pk_values"]) for r in silver
                             if r["origin"] not in (None, "binlog"))
            assert derived == [("c", "fk_cascade", "1"), ("c", "fk_cascade", "2"),
                               ("r", "partition", "1"), ("r", "partition", "2"),
                               ("s", "ddl", "1"), ("s", "ddl", "2"),
                               ("s", "truncate", "1"), ("s", "truncate", "2"),
                               ("s", "truncate", "3")]
            assert replay_silver(silver, conn, TABLES) == server_tables(conn, TABLES)
            assert run_silver(spark, cfg).appended == 0
            again = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
            assert again.count() == len(silver)
