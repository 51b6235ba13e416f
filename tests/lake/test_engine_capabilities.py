"""Capabilities asked, not assumed (pipelines/lake/delta_ops.py): the embedded Sail engine has no
DESCRIBE HISTORY, VACUUM, OPTIMIZE or change data feed, so history and vacuum go through
delta-rs there; delta-spark (the JVM Spark Connect server) has them all, and the same calls
use SQL. Retention properties go through delta-rs on both. ``silver.change_data_feed = true`` gives silver a change data
feed on delta-spark (read back with ``readChangeFeed`` and ``table_changes_by_path``) and a
warning on Sail.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.lake.delta_ops import (BOUNDED_COMMIT_MB, Capabilities, capabilities, commit_bytes,
                                 history, holds_commit_rows, set_retention, vacuum_table)
from pipelines.engine.session import engine_cores
from pipelines.silver.job import run_silver
from tests.support.engine_cli import binlake
from tests.support.python_run import run_python

pytestmark = [pytest.mark.spark, pytest.mark.matrix]

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples" / "binlogs"
RETENTION = {"log_retention": "interval 30 days", "deleted_file_retention": "interval 7 days"}


def _two_commits(session, path: Path) -> None:
    session.range(5).write.format("delta").save(str(path))
    session.range(5, 8).write.format("delta").mode("append").save(str(path))


def test_sail_lacks_them_and_delta_rs_stands_in(spark, tmp_path: Path) -> None:
    assert capabilities(spark) == Capabilities()
    assert capabilities(spark) is capabilities(spark)  # asked once per session
    path = tmp_path / "t"
    _two_commits(spark, path)
    assert [h["version"] for h in history(spark, str(path))] == [1, 0]
    props = set_retention(str(path), **RETENTION)
    assert props["delta.deletedFileRetentionDuration"] == "interval 7 days"
    done = vacuum_table(str(path), dry_run=True, spark=spark)
    assert (done["via"], done["version"], done["files"]) == ("delta-rs", 2, [])


def test_sail_holds_a_commits_rows_so_commits_are_bounded(spark) -> None:
    """Sail's Delta writer holds a commit's rows until it ends (docs/performance.md): unset,
    bronze and silver commit every 64 MB of binlog there; a setting is taken as it is."""
    assert holds_commit_rows(spark)
    assert commit_bytes(spark, None) == int(BOUNDED_COMMIT_MB * 2**20) == 64 * 2**20
    # binlake's tasks write the files (task_files): nothing holds a commit's rows
    assert commit_bytes(spark, None, engine_writes=False) == 0
    assert commit_bytes(spark, 0.5, engine_writes=False) == 2**19
    assert commit_bytes(spark, 0) == 0
    assert commit_bytes(spark, 0.5) == 2**19


def test_delta_spark_streams_its_writes_so_a_run_commits_once(delta_spark) -> None:
    """JVM Spark's writer writes rows to files as they come; each extra commit cost a job and
    a slice too small for its cores: unset, a run commits once (a setting still bounds)."""
    assert not holds_commit_rows(delta_spark)
    assert commit_bytes(delta_spark, None) == 0
    assert commit_bytes(delta_spark, 64) == 64 * 2**20


def test_the_embedded_engine_runs_on_this_machines_cores(spark) -> None:
    assert engine_cores(spark) == os.cpu_count()


def test_jvm_spark_is_asked_its_parallelism(delta_spark) -> None:
    """Bronze splits a file into as many tasks as the engine runs at once (a cluster's cores,
    not the driver's): JVM Spark is asked, by the partitions of a range it splits."""
    assert engine_cores(delta_spark) == 2  # the Connect server's local[2]
    # This machine has 2 cores: a classic JVM of its own with 3, in a subprocess (a classic
    # session here would be the active one for this module's later tests).
    code = ("from pipelines.config import EngineConfig; "
            "from pipelines.engine.session import get_spark, engine_cores; "
            "print('cores', engine_cores(get_spark(EngineConfig(kind='spark', "
            "master='local[3]'))))")
    done = run_python(code)
    assert "cores 3" in done.stdout.splitlines(), done.stdout[-500:]


def test_delta_spark_has_them_and_sql_is_used(delta_spark, tmp_path: Path) -> None:
    caps = capabilities(delta_spark)
    assert caps == Capabilities(describe_history=True, vacuum=True, optimize=True,
                                change_data_feed=True)
    path = tmp_path / "t"
    _two_commits(delta_spark, path)
    hist = history(delta_spark, str(path))
    assert [h["version"] for h in hist] == [1, 0]
    assert [h["operation"] for h in hist] == ["WRITE", "WRITE"]
    props = set_retention(str(path), **RETENTION)  # delta-rs; delta-spark reads it back
    assert props["delta.logRetentionDuration"] == "interval 30 days"
    shown = {r["key"]: r["value"] for r in
             delta_spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
    assert shown["delta.deletedFileRetentionDuration"] == "interval 7 days"
    done = vacuum_table(str(path), spark=delta_spark)
    assert (done["via"], done["files"]) == ("sql", [])
    assert done["version"] >= 2  # the property commit, and delta-spark logs VACUUM START/END


def test_silver_change_data_feed_on_delta_spark(spark, delta_spark, spark_connect_url,
                                                tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    files = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), files=files[:3])
    env = {"BINLAKE_SILVER_CHANGE_DATA_FEED": "true"}
    remote = ["--spark-remote", spark_connect_url]
    binlake(remote, lake, "silver", env=env)
    silver = cfg.table_path("silver", "binlog_events")
    first = delta_spark.read.format("delta").load(silver).count()
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), files=files[3:])
    binlake(remote, lake, "silver", env=env)
    total = delta_spark.read.format("delta").load(silver).count()
    assert 0 < first < total
    assert DeltaTable(silver).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    feed = (delta_spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", 0).load(silver))
    kinds = {r[0]: r[1] for r in feed.groupBy("_change_type").count().collect()}
    assert kinds == {"insert": total}
    last = DeltaTable(silver).version()
    newest = delta_spark.sql(
        f"SELECT COUNT(*) FROM table_changes_by_path('{silver}', {last}, {last})").collect()
    assert newest[0][0] == total - first


def test_silver_change_data_feed_on_sail_warns(spark, tmp_path: Path, caplog) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                         "silver.change_data_feed": True})
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), all_files=True)
    with caplog.at_level(logging.WARNING, logger="pipelines.silver.job"):
        res = run_silver(spark, cfg)
    silver = cfg.table_path("silver", "binlog_events")
    # written all the same: the 340 row changes `mariadb-binlog -v` prints for the samples
    assert res.appended == spark.read.format("delta").load(silver).count() == 340
    assert any("no Delta change data feed" in r.getMessage() for r in caplog.records)
    assert "delta.enableChangeDataFeed" not in (DeltaTable(silver).metadata().configuration or {})
