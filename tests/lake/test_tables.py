"""The lake registry (``pipelines/lake/tables.py``): one declaration per table, and every stage and
every table list (vacuum, views, docs) goes through it."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.bronze.job import run_bronze
from pipelines.cli.main import build_parser
from pipelines.config import load_config
from pipelines.command import config_of
from pipelines.errors import ConfigError
from pipelines.gold.job import run_vacuum
from pipelines.config import parse_catalog
from pipelines.lake.tables import (BRONZE_EVENTS, SILVER_EVENTS, Lake, lake_table, lake_tables,
                                   register, tables_markdown)
from pipelines.quality import run_quality
from pipelines.silver.job import run_silver
from pipelines.lake.sql_types import arrow_type, parse_columns
from pipelines.ops.views import register_views

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "lake.md"


def test_columns_give_ddl_and_arrow() -> None:
    cols = parse_columns("a string, b array<array<string>>, `c` decimal(10, 2), d timestamp")
    assert cols == (("a", "string"), ("b", "array<array<string>>"), ("c", "decimal(10, 2)"),
                    ("d", "timestamp"))
    assert arrow_type("array<array<string>>") == pa.list_(pa.list_(pa.string()))
    assert arrow_type("timestamp") == pa.timestamp("us", tz="UTC")
    assert arrow_type("timestamp_ntz") == pa.timestamp("us")
    assert arrow_type("decimal(10, 2)") == pa.decimal128(10, 2)
    with pytest.raises(ValueError, match="interval"):
        parse_columns("a interval")
    with pytest.raises(ValueError, match="name type"):
        parse_columns("a, b int")


def test_one_declaration_per_table() -> None:
    again = register("silver", "progress", "source_id string, binlog_file string, "
                     "bronze_updated_at timestamp, updated_at timestamp, ddl string, "
                     "derived_with string")
    assert again is lake_table("silver", "progress")
    with pytest.raises(ValueError, match="another declaration"):
        register("silver", "progress", "source_id string")
    with pytest.raises(ValueError, match="partition column"):
        register("test", "bad", "a string", partition_by=["b"])
    with pytest.raises(ValueError, match="statistics column"):
        register("test", "bad", "a string", stats_columns=["a", "c"])
    with pytest.raises(ValueError, match="cannot have statistics"):
        register("test", "bad", "a string, b int", partition_by=["b"], stats_columns=["a", "b"])
    with pytest.raises(KeyError, match="no lake table nope/nope"):
        lake_table("nope", "nope")
    names = [t.table_name for t in lake_tables()]
    assert len(names) == len(set(names))
    assert SILVER_EVENTS.ddl(exclude=["pk_hash"]).count(",") == len(SILVER_EVENTS.columns) - 2
    with pytest.raises(KeyError, match="no column"):
        BRONZE_EVENTS.ddl(exclude=["nope"])


def test_paths_identifiers_and_the_catalog_setting(tmp_path: Path) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "a`b")})
    lake = Lake.of(cfg)
    path = str(tmp_path / "a`b" / "bronze" / "binlog_events")
    assert cfg.table_path("bronze", "binlog_events") == lake.path(BRONZE_EVENTS) == path
    assert lake.ident(BRONZE_EVENTS) == "delta.`" + path.replace("`", "``") + "`"
    assert cfg.table_path("mirror", "state") == str(tmp_path / "a`b" / "mirror" / "state")

    env = {"BINLAKE_LAKE_CATALOG": "main.binlake"}
    cat = Lake.of(load_config(env=env, overrides={"lake.root": str(tmp_path)}))
    assert cat.ident(SILVER_EVENTS) == "`main`.`binlake`.`silver_binlog_events`"
    assert cat.where(SILVER_EVENTS) == cat.ident(SILVER_EVENTS)
    assert cat.path(SILVER_EVENTS) == str(tmp_path / "silver" / "binlog_events")
    args = build_parser().parse_args(["--catalog", "spark_catalog.`my-lake`", "status"])
    assert config_of(args).lake.catalog == "spark_catalog.`my-lake`"
    assert parse_catalog("spark_catalog.`my-lake`") == ("spark_catalog", "my-lake")
    assert parse_catalog("binlake") == ("binlake",)
    for bad in ("a.b.c", "a..b", "a b", ".a"):
        with pytest.raises(ConfigError, match="lake.catalog"):
            load_config(env={}, overrides={"lake.catalog": bad})


def test_docs_list_every_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert tables_markdown() in text, "docs/lake.md is stale: paste pipelines.lake.tables.tables_markdown()"


def _delta_dirs(root: Path) -> set[str]:
    return {os.path.relpath(d, root) for d, subdirs, _ in os.walk(root)
            if "_delta_log" in subdirs}


def test_stages_write_only_registered_tables_and_vacuum_and_views_cover_them(
        spark, tmp_path: Path) -> None:
    """On the embedded engine with paths: what the stages write is exactly what the registry
    lists, vacuum keeps every one of them (quality/*, silver/progress, …), views name them."""
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    res = run_bronze(spark, cfg, binlog_dir=str(SAMPLES), files=["mariadb-bin.000002"])
    assert res.files and not res.failed
    run_silver(spark, cfg)
    run_quality(spark, cfg, window="all")
    written = _delta_dirs(tmp_path / "lake")
    registered = {t.key for t in lake_tables()}
    assert written <= registered, f"tables written but not registered: {written - registered}"
    assert {"bronze/binlog_events", "bronze/files", "silver/binlog_events", "silver/quarantine",
            "silver/progress", "quality/results"} <= written

    vacuumed = {t["table"] for t in run_vacuum(cfg, dry_run=True)}
    assert vacuumed == written

    views = register_views(spark, cfg)
    assert {lake_table(*k.split("/")).table_name for k in written} <= set(views)
    assert "quarantine" in views  # the older short name still answers
    n = spark.sql("SELECT count(*) AS n FROM silver_binlog_events").collect()[0]["n"]
    assert n == Lake.of(cfg).read(spark, SILVER_EVENTS).count() > 0
    # A row change's TABLE_MAP facts, joined as docs/bronze.md shows: every change has them.
    changes, named = spark.sql(
        "SELECT count(*) AS n, count(m.column_names) AS named FROM bronze_binlog_events c "
        "LEFT JOIN bronze_table_maps m USING (table_map_hash) "
        "WHERE c.event_type IN ('INSERT', 'UPDATE', 'DELETE')").collect()[0]
    assert changes == named > 0


def test_silver_keeps_statistics_for_what_readers_filter_by(spark, tmp_path: Path) -> None:
    """The silver table binlake creates carries min/max statistics for the declared columns
    only (delta.dataSkippingStatsColumns), never for the JSON images."""
    import json

    from pipelines.lake.tables import Lake

    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    lake = Lake.of(cfg)
    row = {c: None for c in SILVER_EVENTS.column_names}
    row.update(source_id="s", binlog_file="b.000001", start_pos=4, row_in_event=0, seq=4,
               row_before='{"id": 1}', row_after='{"id": 2}', schema_name="db", table_name="t")
    lake.append(spark.createDataFrame([row], SILVER_EVENTS.ddl()), SILVER_EVENTS)
    log = sorted((tmp_path / "lake" / "silver" / "binlog_events" / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for f in log for line in f.read_text().splitlines()]
    config = next(a["metaData"]["configuration"] for a in actions if "metaData" in a)
    assert config["delta.dataSkippingStatsColumns"].split(",") == list(SILVER_EVENTS.stats_columns)
    stats = [json.loads(a["add"]["stats"]) for a in actions if "add" in a]
    assert stats and all("row_after" not in s["minValues"] and "seq" in s["minValues"]
                         for s in stats)
    assert lake.read(spark, SILVER_EVENTS).count() == 1
