"""``lake.catalog`` on the embedded engine (Sail's own catalog): the same rows as by path,
and a catalog that forgot its tables finds them again at the lake paths."""

from __future__ import annotations

import uuid
from pathlib import Path

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, Lake
from pipelines.quality import last_quality, run_quality
from pipelines.silver.job import KEY, run_silver
from pipelines.ops.status import collect_status
from pipelines.ops.views import register_views

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
FILES = ["mariadb-bin.000002", "mariadb-bin.000003"]


def _rows(df) -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: [r[k] for k in KEY])


def test_catalog_tables_hold_what_paths_hold(spark, tmp_path: Path) -> None:
    by_path = load_config(env={}, overrides={"lake.root": str(tmp_path / "paths")})
    schema = f"binlake_{uuid.uuid4().hex[:8]}"
    by_catalog = load_config(env={}, overrides={"lake.root": str(tmp_path / "cat"),
                                                "lake.catalog": f"spark_catalog.{schema}"})
    for cfg in (by_path, by_catalog):
        assert not run_bronze(spark, cfg, binlog_dir=str(SAMPLES), files=FILES).failed
        run_silver(spark, cfg)
        run_quality(spark, cfg, window="all")
    paths, cat = Lake.of(by_path), Lake.of(by_catalog)
    assert cat.ident(SILVER_EVENTS) == f"`spark_catalog`.`{schema}`.`silver_binlog_events`"
    silver = _rows(cat.read(spark, SILVER_EVENTS))
    assert silver and silver == _rows(paths.read(spark, SILVER_EVENTS))
    assert _rows(cat.read(spark, BRONZE_EVENTS)) == _rows(paths.read(spark, BRONZE_EVENTS))
    n = spark.sql(f"SELECT count(*) AS n FROM {cat.ident(SILVER_EVENTS)}").collect()[0]["n"]
    assert n == len(silver)
    # The catalog's tables are external, at the lake paths.
    assert (tmp_path / "cat" / "silver" / "binlog_events" / "_delta_log").is_dir()
    # In the catalog version 0 is the CREATE TABLE (empty), then the stage's append; at a
    # path on the embedded engine the first append creates the table with its files
    # (task_files). Time travel by version.
    version = cat.version(spark, SILVER_EVENTS)
    assert version == 1 and paths.version(spark, SILVER_EVENTS) == 0
    assert _rows(cat.read(spark, SILVER_EVENTS, version)) == silver
    assert cat.read(spark, SILVER_EVENTS, 0).count() == 0
    assert _rows(paths.read(spark, SILVER_EVENTS, 0)) == silver
    st = collect_status(spark, by_catalog)
    assert st["catalog"] == f"spark_catalog.{schema}" and st["silver"]["rows"] == len(silver)
    assert last_quality(spark, by_catalog)["status"] == last_quality(spark, by_path)["status"]
    assert "silver_binlog_events" in register_views(spark, by_catalog)

    # A catalog that forgot the tables (a new process's in-memory one): found at their paths.
    for t in ("bronze_binlog_events", "bronze_files", "silver_binlog_events", "silver_progress"):
        spark.sql(f"DROP TABLE spark_catalog.{schema}.{t}").collect()
    again = run_bronze(spark, by_catalog, binlog_dir=str(SAMPLES), files=FILES)
    assert sorted(again.skipped) == FILES
    assert run_silver(spark, by_catalog).appended == 0
    assert _rows(Lake.of(by_catalog).read(spark, SILVER_EVENTS)) == silver  # registered again
