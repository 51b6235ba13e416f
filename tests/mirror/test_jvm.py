"""The mirror on a local JVM Spark with delta-spark (its MERGE, time travel and partitioned
history): built in two runs from the sample binlogs, the current tables hold the server's
final rows (``samples/binlogs/expected_tables.json``) and the history's open versions are
those rows. The samples come without a schema snapshot: the columns are strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.mirror.job import mirror_path, mirrored_tables, run_mirror
from pipelines.silver.job import run_silver
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture

pytestmark = [pytest.mark.classic]

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"


def test_mirror_on_jvm_spark_in_two_runs(jvm_spark, tmp_path: Path) -> None:  # noqa: F811
    spark = jvm_spark
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    files = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))
    for part in (files[:2], files):
        assert not run_bronze(spark, cfg, binlog_dir=str(SAMPLES), files=part).failed
        run_silver(spark, cfg)
        assert run_mirror(spark, cfg).tables
    assert run_mirror(spark, cfg).changes == 0  # a re-run adds nothing
    expected = json.loads((SAMPLES / "expected_tables.json").read_text("utf-8"))["tables"]
    assert {f"{s}.{t}" for s, t in mirrored_tables(spark, cfg)} == set(expected)
    for name, table in expected.items():
        schema, tbl = name.split(".")
        key = table["primary_key"] or table["columns"]
        idx = [table["columns"].index(k) for k in key]
        want = sorted((tuple(r[i] for i in idx) for r in table["rows"]), key=repr)
        current = spark.read.format("delta").load(mirror_path(cfg, "current", schema, tbl))
        keys = [f"`{k}`" for k in key]
        got = sorted((tuple(r) for r in current.selectExpr(*keys).collect()), key=repr)
        assert got == want, f"{name}: current keys differ from the server's"
        history = spark.read.format("delta").load(mirror_path(cfg, "history", schema, tbl))
        open_ = sorted((tuple(r) for r in history.where("__END_AT IS NULL")
                        .selectExpr(*keys).collect()), key=repr)
        assert open_ == want, f"{name}: open history versions differ"


def test_mirror_through_the_jvm_spark_connect_server(spark_connect_url, tmp_path: Path
                                                     ) -> None:
    """``binlake mirror`` through JVM Spark Connect in two runs (its engine rewrites a JSON
    member's text: the mirror's span probe says no there): the current tables hold the
    server's final rows (read with delta-rs, a reader that is none of the engines)."""
    from deltalake import DeltaTable

    from tests.support.engine_cli import binlake, engine_flags

    flags = engine_flags("connect", spark_connect_url)
    lake = tmp_path / "lake"
    files = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))
    for part in (files[:2], files):
        binlake(flags, lake, "bronze", "--binlog-dir", str(SAMPLES), "--files", ",".join(part))
        binlake(flags, lake, "silver")
        binlake(flags, lake, "mirror")
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    expected = json.loads((SAMPLES / "expected_tables.json").read_text("utf-8"))["tables"]
    for name, table in expected.items():
        schema, tbl = name.split(".")
        key = table["primary_key"] or table["columns"]
        idx = [table["columns"].index(k) for k in key]
        want = sorted((tuple(r[i] for i in idx) for r in table["rows"]), key=repr)
        current = DeltaTable(mirror_path(cfg, "current", schema, tbl)).to_pyarrow_table()
        got = sorted(zip(*[current.column(k).to_pylist() for k in key]), key=repr)
        assert got == want, f"{name}: current keys differ from the server's"
