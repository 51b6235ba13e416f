"""Issue 9 §4: with ``lake.catalog`` every stage reads and writes metastore tables.

Local JVM Spark with delta-spark and its own (in-memory) catalog: a MariaDB 10.11 runs the
mixed workload (with a mid-stream ALTER), then snapshot → bronze → silver → quality → gold,
status, the SQL views and vacuum all run against ``spark_catalog.<schema>``. Silver is judged
by replaying it against the server's own SELECT; gold by the server's rows; the catalog by
what it lists and where its tables' files are (external tables at the lake paths).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.gold.job import run_gold, run_vacuum
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, Lake, lake_tables
from pipelines.quality import last_quality, run_quality
from pipelines.silver.job import run_silver
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import load_snapshots, save_snapshot
from pipelines.ops.status import collect_status, render_status
from pipelines.ops.views import register_views
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture
from devtools.mariadb import MariaDBServer
from tests.support.replay import replay_silver, server_tables
from devtools.mixed_workload import WORKLOAD_TABLES, run_mixed_workload

pytestmark = [pytest.mark.classic, pytest.mark.mariadb]


def _catalog_tables(spark, schema: str) -> set[str]:
    """The schema's tables (SHOW TABLES also lists the session's temporary views)."""
    return {r["tableName"] for r in spark.sql(f"SHOW TABLES IN spark_catalog.{schema}").collect()
            if not r["isTemporary"]}


def test_every_stage_on_catalog_tables(jvm_spark, tmp_path: Path) -> None:  # noqa: F811
    spark = jvm_spark
    schema = f"binlake_{uuid.uuid4().hex[:8]}"
    lake_root = tmp_path / "lake"
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        cfg = load_config(env={"BINLAKE_LAKE_CATALOG": f"spark_catalog.{schema}"}, overrides={
            "lake.root": str(lake_root), "gold.dsn": server.dsn("gold_catalog")})
        lake = Lake.of(cfg)
        assert lake.uses_catalog and lake.catalog == f"spark_catalog.{schema}"
        with server.connect() as conn:
            run_mixed_workload(conn, alter_mid_stream=True)
        server.flush_logs()
        snapshot, checks = take_snapshot(Dsn.parse(server.dsn()), source_id=cfg.source.name,
                                         schemas=["shop", "ops"])
        assert save_snapshot(spark, cfg, snapshot, checks)
        assert [s.snapshot_id for s in load_snapshots(spark, cfg)] == [snapshot.snapshot_id]
        for f in server.binlog_files():
            shutil.copy(f, binlogs / f.name)

        bronze = run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
        assert bronze.files and not bronze.failed
        silver_res = run_silver(spark, cfg)
        assert silver_res.appended > 0 and silver_res.quarantined == 0

        # Silver, read from the catalog table, replays to the server's own tables.
        ident = f"spark_catalog.{schema}.silver_binlog_events"
        silver = [r.asDict() for r in spark.read.table(ident).collect()]
        assert len(silver) == silver_res.appended
        with server.connect() as conn:
            expected = server_tables(conn, WORKLOAD_TABLES)
            replayed = replay_silver(silver, conn, WORKLOAD_TABLES)
        for t in WORKLOAD_TABLES:
            assert replayed[t] == expected[t], f"{t}: silver replay differs from the server"

        # The catalog lists the stages' tables, external at the lake paths.
        listed = _catalog_tables(spark, schema)
        assert {"bronze_binlog_events", "bronze_files", "silver_binlog_events",
                "silver_quarantine", "silver_progress", "silver_schema_snapshots",
                "silver_fk_constraints", "silver_source_checks"} <= listed
        detail = spark.sql(f"DESCRIBE DETAIL {lake.ident(BRONZE_EVENTS)}").collect()[0]
        assert list(detail["partitionColumns"]) == ["source_id", "binlog_file"]
        assert lake.location(spark, BRONZE_EVENTS) == str(lake_root / "bronze" / "binlog_events")
        ext = spark.sql(f"DESCRIBE TABLE EXTENDED {lake.ident(SILVER_EVENTS)}").collect()
        assert any(r["col_name"] == "Type" and r["data_type"] == "EXTERNAL" for r in ext)

        # Quality: results and failures land in catalog tables; status reads them back.
        q = run_quality(spark, cfg, window="all")
        assert q.rows_checked["silver"] == len(silver)
        assert {"quality_results"} <= _catalog_tables(spark, schema)
        stored = spark.read.table(f"spark_catalog.{schema}.quality_results").where(
            f"run_id = '{q.run_id}'").count()
        assert stored == len(q.rules)
        assert last_quality(spark, cfg)["run_id"] == q.run_id

        # Gold: every silver row exactly once, then nothing more.
        g = run_gold(spark, cfg)
        assert (g.rows_read, g.rows_inserted) == (len(silver), len(silver))
        assert g.to_version == lake.version(spark, SILVER_EVENTS)
        assert run_gold(spark, cfg).rows_inserted == 0
        assert server.execute("SELECT COUNT(*) FROM binlog_events",
                              db="gold_catalog")[0][0] == len(silver)

        # Re-runs change nothing (exactly once through the catalog tables).
        rows = lake.read(spark, BRONZE_EVENTS).count()
        again = run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
        partial = [f.binlog_file for f in bronze.files if f.status == "partial"]
        assert [f.binlog_file for f in again.files] == partial  # the last file is redone
        assert len(again.skipped) == len(bronze.files) - len(partial)
        assert lake.read(spark, BRONZE_EVENTS).count() == rows
        assert run_silver(spark, cfg).appended == 0

        st = collect_status(spark, cfg)
        assert st["catalog"] == f"spark_catalog.{schema}"
        assert st["silver"]["rows"] == len(silver)
        assert st["silver"]["version"] == lake.version(spark, SILVER_EVENTS)
        assert st["gold"]["silver_version"] == st["silver"]["version"]
        assert st["quality"]["run_id"] == q.run_id
        text = render_status(st)
        assert f"(catalog spark_catalog.{schema})" in text

    # SQL views over the catalog tables, under the catalog names and the older short ones.
    views = register_views(spark, cfg)
    assert {"bronze_binlog_events", "silver_binlog_events", "quarantine",
            "silver_quarantine", "quality_results"} <= set(views)
    n = spark.sql("SELECT count(*) AS n FROM silver_binlog_events").collect()[0]["n"]
    assert n == len(silver)
    first = spark.sql(f"SELECT count(*) AS n FROM {lake.ident(SILVER_EVENTS)} VERSION AS OF 1"
                      ).collect()[0]["n"]
    assert first == len(silver)

    # Vacuum covers every table the lake holds (quality/*, silver/progress, source_checks too).
    done = {t["table"] for t in run_vacuum(cfg, dry_run=True, spark=spark)}
    on_disk = {t.key for t in lake_tables() if (lake_root / t.key / "_delta_log").is_dir()}
    assert done == on_disk
    assert {"quality/results", "silver/progress", "silver/source_checks"} <= done


def test_a_catalog_that_forgot_its_tables_registers_them_again(jvm_spark,  # noqa: F811
                                                               tmp_path: Path) -> None:
    """The in-memory catalog of a new process starts empty: stages must find the lake's
    tables at their paths (and register them), not start over."""
    spark = jvm_spark
    schema = f"binlake_{uuid.uuid4().hex[:8]}"
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                         "lake.catalog": f"spark_catalog.{schema}"})
    name = "mariadb-bin.000002"
    src = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
    first = run_bronze(spark, cfg, binlog_dir=str(src), files=[name])
    assert first.files and not first.failed
    rows = Lake.of(cfg).read(spark, BRONZE_EVENTS).count()
    for t in ("bronze_binlog_events", "bronze_files"):
        spark.sql(f"DROP TABLE spark_catalog.{schema}.{t}")  # external: the files stay
    assert not {"bronze_binlog_events", "bronze_files"} & _catalog_tables(spark, schema)

    again = run_bronze(spark, cfg, binlog_dir=str(src), files=[name])
    assert again.skipped == [name]  # bronze/files was found at its path
    assert "bronze_files" in _catalog_tables(spark, schema)
    assert Lake.of(cfg).read(spark, BRONZE_EVENTS).count() == rows  # registered by the read
    assert {"bronze_binlog_events", "bronze_files"} <= _catalog_tables(spark, schema)


def test_managed_tables_live_in_the_catalogs_storage(jvm_spark, tmp_path: Path,  # noqa: F811
                                                     mariadb) -> None:
    """``lake.managed``: the catalog owns the storage (Unity Catalog's managed tables); the
    lake root holds no table, and the delta-rs helpers find the files through the catalog."""
    spark = jvm_spark
    schema = f"binlake_{uuid.uuid4().hex[:8]}"
    db = f"gold_{schema}"
    cfg = load_config(env={"BINLAKE_LAKE_MANAGED": "true"}, overrides={
        "lake.root": str(tmp_path / "lake"), "lake.catalog": f"spark_catalog.{schema}",
        "gold.dsn": mariadb.dsn(db)})
    lake = Lake.of(cfg)
    assert lake.managed
    src = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
    assert not run_bronze(spark, cfg, binlog_dir=str(src), files=["mariadb-bin.000002"]).failed
    appended = run_silver(spark, cfg).appended
    assert appended > 0
    assert run_quality(spark, cfg, window="all").rows_checked["silver"] == appended
    g = run_gold(spark, cfg)
    assert g.rows_inserted == appended and g.to_version == lake.version(spark, SILVER_EVENTS)
    assert run_gold(spark, cfg).rows_inserted == 0
    assert mariadb.execute("SELECT COUNT(*) FROM binlog_events", db=db)[0][0] == appended

    assert not list((tmp_path / "lake").rglob("_delta_log"))  # nothing written by path
    ext = spark.sql(f"DESCRIBE TABLE EXTENDED {lake.ident(SILVER_EVENTS)}").collect()
    assert any(r["col_name"] == "Type" and r["data_type"] == "MANAGED" for r in ext)
    loc = lake.location(spark, SILVER_EVENTS)
    assert loc and not loc.startswith(str(tmp_path)) and Path(loc, "_delta_log").is_dir()
    vacuumed = {t["table"] for t in run_vacuum(cfg, dry_run=True, spark=spark)}
    assert {"bronze/binlog_events", "silver/binlog_events", "quality/results"} <= vacuumed
