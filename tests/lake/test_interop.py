"""Interop between the engines on the same lake files, both ways.

- A table written by the embedded Sail engine is read, appended to and time-travelled by
  delta-spark (the JVM Spark Connect server), and the reverse.
- delta-rs (``deltalake``) reads the lakes both engines write, and they agree on what a
  reader needs: protocol versions (readable by all three), partition columns and values,
  TIMESTAMP (not TIMESTAMP_NTZ) event times, and per-file column statistics.
- A user indexes on a laptop with Sail and continues the same lake on JVM Spark
  (``binlake bronze`` then ``bronze`` + ``silver`` of more files with ``--engine spark``), and
  the reverse: every row change is in bronze and silver exactly once.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from tests.support.binlog_verbose import read_row_changes
from tests.support.engine_cli import binlake

pytestmark = [pytest.mark.spark, pytest.mark.matrix]

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
FILES = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))
KEY = ["source_id", "binlog_file", "start_pos", "row_in_event"]


def _read_append_travel(writer, reader, path: Path) -> None:
    writer.range(10).selectExpr("id", "CAST(id AS STRING) AS s").write.format("delta").save(
        str(path))
    assert reader.read.format("delta").load(str(path)).count() == 10
    reader.range(10, 15).selectExpr("id", "CAST(id AS STRING) AS s").write.format("delta") \
        .mode("append").save(str(path))
    for session in (writer, reader):
        assert session.read.format("delta").load(str(path)).count() == 15
        old = session.read.format("delta").option("versionAsOf", 0).load(str(path))
        assert sorted(r[0] for r in old.select("id").collect()) == list(range(10))
    assert DeltaTable(str(path)).version() == 1
    assert DeltaTable(str(path), version=0).to_pyarrow_table().num_rows == 10


def test_sail_table_read_appended_time_travelled_by_delta_spark(spark, delta_spark,
                                                                tmp_path: Path) -> None:
    _read_append_travel(spark, delta_spark, tmp_path / "t")


def test_delta_spark_table_read_appended_time_travelled_by_sail(spark, delta_spark,
                                                                tmp_path: Path) -> None:
    _read_append_travel(delta_spark, spark, tmp_path / "t")


def _reader_facts(table: str) -> dict:
    """What a reader of ``table`` depends on, as delta-rs sees it."""
    dt = DeltaTable(table)
    proto = dt.protocol()
    acts = pa.table(dt.get_add_actions(flatten=True))
    stats = sorted(c for c in acts.column_names if c.split(".")[0] in ("min", "max", "null_count"))
    parts = sorted({tuple(r.values()) for r in acts.select(
        [c for c in acts.column_names if c.startswith("partition.")]).to_pylist()})
    return {"protocol": (proto.min_reader_version, proto.min_writer_version),
            "reader_features": sorted(proto.reader_features or []),
            "partition_columns": dt.metadata().partition_columns,
            "partitions": parts,
            "types": {f.name: str(f.type) for f in dt.schema().fields},
            "stats_columns": stats,
            "num_records": sum(acts.column("num_records").to_pylist()),
            "rows": dt.to_pyarrow_table().num_rows}


def test_delta_rs_reads_both_engines_lakes_alike(spark, spark_connect_url, tmp_path: Path) -> None:
    lakes = {"sail": tmp_path / "sail", "delta-spark": tmp_path / "delta-spark"}
    for engine, lake in lakes.items():
        flags = ["--spark-remote", spark_connect_url] if engine == "delta-spark" else []
        binlake(flags, lake, "bronze", "--binlog-dir", str(SAMPLES), "--all")
        binlake(flags, lake, "silver")
    for table in ("bronze/binlog_events", "silver/binlog_events", "bronze/files"):
        facts = {engine: _reader_facts(str(lake / table)) for engine, lake in lakes.items()}
        sail, jvm = facts["sail"], facts["delta-spark"]
        assert sail == jvm, f"{table}: the engines' tables differ for a reader"
        assert sail["protocol"][0] <= 3 and sail["protocol"][1] <= 7, sail["protocol"]
        assert sail["num_records"] == sail["rows"] > 0  # stats cover every row
        assert sail["stats_columns"], f"{table}: no column statistics"
        for name, kind in sail["types"].items():
            if "timestamp" in kind.lower():
                assert "ntz" not in kind.lower(), (table, name, kind)  # TIMESTAMP, UTC
    silver = _reader_facts(str(lakes["sail"] / "silver/binlog_events"))
    assert silver["partition_columns"] == ["event_date"]


def _exactly_once(spark, lake: Path) -> None:
    reference = {(rc.file, rc.start_pos, rc.row_in_event)
                 for f in FILES for rc in read_row_changes(SAMPLES / f)}
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    for layer in ("bronze", "silver"):
        df = spark.read.format("delta").load(cfg.table_path(layer, "binlog_events"))
        if layer == "bronze":
            df = df.where("event_type IN ('INSERT','UPDATE','DELETE')")
        keys = [(r["binlog_file"], r["start_pos"], r["row_in_event"])
                for r in df.select(*KEY).collect()]
        assert len(keys) == len(set(keys)) == len(reference), layer
        assert set(keys) == reference, layer


@pytest.mark.parametrize("first,then", [("sail", "spark"), ("spark", "sail")])
def test_index_on_one_engine_continue_on_the_other(spark, tmp_path: Path, first: str,
                                                   then: str) -> None:
    lake = tmp_path / "lake"
    binlake(["--engine", first], lake, "bronze", "--binlog-dir", str(SAMPLES),
            "--files", ",".join(FILES[:3]))
    binlake(["--engine", then], lake, "bronze", "--binlog-dir", str(SAMPLES), "--all")
    binlake(["--engine", then], lake, "silver")
    _exactly_once(spark, lake)
