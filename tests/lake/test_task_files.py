"""Data files written by binlake's tasks on the embedded engine (``pipelines/lake/task_files.py``).

The pure parts are checked against what Spark and Delta write (partition directory escaping,
the statistics' format); the rest on real lakes: the shipped sample binlogs indexed on the
embedded engine (Sail) with binlake's tasks writing bronze's and silver's files, against the
same binlogs indexed with the engine's own Delta writer (``lake.writer = "engine"``), read back
by the engine and by delta-rs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pipelines.cli.main import main
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS
from pipelines.lake.task_files import (FileSpec, commit_files, partition_dir, stats_json,
                                  write_files)

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
FILES = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))


@pytest.mark.parametrize("values, expected", [
    (("default", "mariadb-bin.000001"), "source_id=default/binlog_file=mariadb-bin.000001"),
    # Spark's escaping (ExternalCatalogUtils.escapePathName): these become %XX, others stay
    (("a/b:c", "x=y%z"), "source_id=a%2Fb%3Ac/binlog_file=x%3Dy%25z"),
    (("sp ace", "é"), "source_id=sp ace/binlog_file=é"),
    ((None, "f"), "source_id=__HIVE_DEFAULT_PARTITION__/binlog_file=f"),
])
def test_partition_directories_are_escaped_as_spark_escapes_them(values, expected) -> None:
    assert partition_dir(("source_id", "binlog_file"), values) == expected


def test_statistics_round_timestamps_outwards_and_leave_null_columns_a_count() -> None:
    stats = json.loads(stats_json(3, {
        "event_timestamp": (dt.datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=dt.timezone.utc),
                            dt.datetime(2026, 1, 1, 0, 0, 1, 1500, tzinfo=dt.timezone.utc), 0),
        "start_pos": (4, 900, 0),
        "commit_ts_us": (None, None, 3),
        "event_date": (dt.date(2026, 1, 1), dt.date(2026, 1, 2), 1),
    }))
    assert stats == {
        "numRecords": 3,
        # milliseconds, as Delta writes them: the min floored, the max raised, so the range
        # still holds 00:00:00.001500 and 00:00:01.001500
        "minValues": {"event_timestamp": "2026-01-01T00:00:00.001Z", "start_pos": 4,
                      "event_date": "2026-01-01"},
        "maxValues": {"event_timestamp": "2026-01-01T00:00:01.002Z", "start_pos": 900,
                      "event_date": "2026-01-02"},
        "nullCount": {"event_timestamp": 0, "start_pos": 0, "commit_ts_us": 3, "event_date": 1},
    }


def test_a_task_writes_row_groups_files_and_statistics_as_it_goes(tmp_path: Path) -> None:
    """Rows of two partitions in batches of 7: files of ``row_group_rows`` groups, a new
    file past ``target_bytes``, statistics equal to the rows', a bloom filter where asked."""
    schema = pa.schema([("part", pa.string()), ("k", pa.string()), ("n", pa.int64()),
                        ("flag", pa.bool_()), ("vals", pa.list_(pa.int32()))])
    rows = [{"part": "ab"[i % 2], "k": f"key{i:04d}", "n": i if i % 5 else None,
             "flag": i % 3 == 0, "vals": [i]} for i in range(300)]
    batches = [pa.RecordBatch.from_pylist(rows[i:i + 7], schema=schema)
               for i in range(0, len(rows), 7)]
    spec = FileSpec(str(tmp_path), ("part",), (), ("k",), row_group_rows=40,
                    target_bytes=2500, schema=schema.remove(0))
    out = pa.Table.from_batches(list(write_files(spec)(iter(batches)))).to_pylist()
    assert {json.loads(a["partition_values"])["part"] for a in out} == {"a", "b"}
    assert sum(a["num_records"] for a in out) == 300
    assert len(out) > 2  # target_bytes rolled files over
    seen = []
    for a in out:
        f = pq.ParquetFile(tmp_path / a["path"])
        part = json.loads(a["partition_values"])["part"]
        assert a["path"].startswith(f"part={part}/") and a["size"] == (tmp_path / a["path"]).stat().st_size
        groups = [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)]
        assert all(g <= 40 for g in groups) and sum(groups) == a["num_records"]
        assert f.metadata.row_group(0).column(0).bloom_filter_offset is not None  # "k"
        got = f.read().to_pylist()
        seen += [dict(r, part=part) for r in got]
        stats = json.loads(a["stats"])
        ns = [r["n"] for r in got if r["n"] is not None]
        assert stats["numRecords"] == len(got)
        assert stats["minValues"] == {"k": min(r["k"] for r in got), "n": min(ns)}
        assert stats["maxValues"] == {"k": max(r["k"] for r in got), "n": max(ns)}
        assert stats["nullCount"] == {"k": 0, "n": len(got) - len(ns), "flag": 0, "vals": 0}
    assert sorted(seen, key=lambda r: r["k"]) == rows


def _bag(df) -> Counter:
    """The rows as a multiset, columns by name (a table the engine created from a DataFrame
    puts its partition columns last)."""
    return Counter(repr(tuple(r)) for r in df.select(*sorted(df.columns)).collect())


def _index(lake: Path, *extra: str) -> None:
    assert main(["--lake", str(lake), *extra, "index", "--binlog-dir", str(SAMPLES), "--all"]) == 0


@pytest.mark.spark
def test_tasks_write_the_engines_rows_in_row_groups_with_bloom_filters(spark, tmp_path: Path,
                                                                       monkeypatch) -> None:
    """The sample binlogs indexed twice: binlake's tasks writing bronze's and silver's files
    (row groups of 50 rows), and the engine's Delta writer. The same rows, read by the engine
    and by delta-rs; every commit's metrics count its rows; files in row groups, with a
    ``pk_hash`` bloom filter that a key lookup prunes by."""
    monkeypatch.setenv("BINLAKE_LAKE_ROW_GROUP_ROWS", "50")
    ours, theirs = tmp_path / "tasks", tmp_path / "engine"
    _index(ours)
    monkeypatch.setenv("BINLAKE_LAKE_WRITER", "engine")
    _index(theirs)
    for table in (BRONZE_EVENTS, SILVER_EVENTS):
        a, b = str(ours / table.key), str(theirs / table.key)
        assert _bag(spark.read.format("delta").load(a)) == _bag(spark.read.format("delta").load(b))
        ours_rs, theirs_rs = DeltaTable(a), DeltaTable(b)
        assert ours_rs.to_pyarrow_table().num_rows == theirs_rs.to_pyarrow_table().num_rows
        # binlake's commits, not the engine's; the first creates the table with its files
        history = ours_rs.history()[::-1]
        assert history[0]["operation"] == "CREATE TABLE", history
        assert {c["engineInfo"].split(":")[0] for c in history} == {"delta-rs"}, history
        assert sum(int(c["operationMetrics"]["numOutputRows"]) for c in history) \
            == ours_rs.to_pyarrow_table().num_rows
        adds = pa.table(ours_rs.get_add_actions(flatten=True)).to_pylist()
        assert sum(a["num_records"] for a in adds) == ours_rs.to_pyarrow_table().num_rows
        groups = []
        for a in adds:
            meta = pq.ParquetFile(str(ours / table.key / a["path"])).metadata
            groups += [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            if table is SILVER_EVENTS:
                col = meta.schema.names.index("pk_hash")
                assert meta.row_group(0).column(col).bloom_filter_offset is not None
        assert max(groups) <= 50 and len(groups) > len(adds)  # files of several row groups
        total_groups = len(groups)  # silver's, after the loop

    silver = str(ours / SILVER_EVENTS.key)
    events = spark.read.format("delta").load(silver)
    biggest = events.groupBy("schema_name", "table_name").count().orderBy("count",
                                                                          ascending=False).first()
    row = events.where(f"schema_name = '{biggest[0]}' AND table_name = '{biggest[1]}'").first()
    # keys no row has: a bloom filter answers "maybe" for a few of them wrongly (its false
    # positive rate), so eight are probed and most must read no row group at all
    absent = [row["pk_hash"][:-2] + f"{i:02x}" for i in range(256)
              if f"{i:02x}" != row["pk_hash"][-2:]][:8]
    absent_read = []
    for pk_hash, present in [(row["pk_hash"], True)] + [(a, False) for a in absent]:
        plan = spark.sql(f"EXPLAIN ANALYZE SELECT * FROM delta.`{silver}` WHERE schema_name = "
                         f"'{row['schema_name']}' AND table_name = '{row['table_name']}' AND "
                         f"pk_hash = '{pk_hash}'").collect()[0][0]
        # the row groups the scan met, those left by the statistics, then by the bloom filters
        stats = re.search(r"row_groups_pruned_statistics=(\d+) total → (\d+) matched", plan)
        bloom = re.search(r"row_groups_pruned_bloom_filter=(\d+) total → (\d+) matched", plan)
        assert stats and bloom, plan[-3000:]
        read = int(bloom.group(2))
        if present:  # the row groups holding the key (a bloom filter may say yes wrongly)
            holding = 0
            for a in pa.table(DeltaTable(silver).get_add_actions(flatten=True)).to_pylist():
                f = pq.ParquetFile(str(ours / SILVER_EVENTS.key / a["path"]))
                key = (row["schema_name"], row["table_name"], pk_hash)
                holding += sum(key in {(r["schema_name"], r["table_name"], r["pk_hash"]) for r in
                                       f.read_row_group(i, list(("schema_name", "table_name",
                                                                 "pk_hash"))).to_pylist()}
                               for i in range(f.metadata.num_row_groups))
            assert 1 <= holding <= read < total_groups and read <= holding + 1, plan[-3000:]
        else:
            absent_read.append(read)
    assert sum(r == 0 for r in absent_read) >= 6 and max(absent_read) <= 2, absent_read

    # A re-run appends nothing: the anti-join and bronze's file states read the files.
    version = DeltaTable(silver).version()
    monkeypatch.delenv("BINLAKE_LAKE_WRITER")
    _index(ours)
    assert DeltaTable(silver).version() == version


@pytest.mark.spark
def test_files_written_but_not_committed_are_not_rows(spark, tmp_path: Path) -> None:
    """A task's files are invisible until ``commit_files``: a run that dies between writing
    and committing leaves the table as it was."""
    _index(tmp_path / "lake")
    silver = str(tmp_path / "lake" / SILVER_EVENTS.key)
    before = DeltaTable(silver).version()
    rows = spark.read.format("delta").load(silver).count()
    df = spark.read.format("delta").load(silver)
    spec = FileSpec(silver, SILVER_EVENTS.partition_by, SILVER_EVENTS.stats_columns,
                    SILVER_EVENTS.bloom_columns,
                    schema=SILVER_EVENTS.arrow_schema(exclude=SILVER_EVENTS.partition_by))
    from pipelines.lake.task_files import ADDED_DDL

    added = [r.asDict() for r in df.mapInArrow(write_files(spec), ADDED_DDL).collect()]
    assert added and all((Path(silver) / a["path"]).exists() for a in added)
    assert DeltaTable(silver).version() == before
    assert spark.read.format("delta").load(silver).count() == rows
    assert commit_files(silver, added) == rows  # committed: the same rows once more
    assert spark.read.format("delta").load(silver).count() == 2 * rows
    assert DeltaTable(silver).version() == before + 1


def test_a_task_that_fails_leaves_no_file(tmp_path: Path) -> None:
    """The rows' producer raises after some files were written and rolled over: the task
    removes them all and raises the error."""
    schema = pa.schema([("k", pa.string())])

    def batches():
        for i in range(20):
            yield pa.RecordBatch.from_pylist([{"k": f"{i}-{j}" * 20} for j in range(50)],
                                             schema=schema)
        raise ValueError("bronze changed")

    spec = FileSpec(str(tmp_path / "t"), row_group_rows=30, target_bytes=2000)
    with pytest.raises(ValueError, match="bronze changed"):
        list(write_files(spec)(batches()))
    assert [p for p in (tmp_path / "t").rglob("*") if p.is_file()] == []


def test_a_task_keeps_few_files_open_whatever_its_partitions(tmp_path: Path) -> None:
    """Rows of 30 partitions interleaved (silver's days of a long binlog file): the task
    holds at most ``_OPEN_FILES`` files open, and every row is written once."""
    from pipelines.lake.task_files import _OPEN_FILES, _Sink

    schema = pa.schema([("day", pa.int32()), ("n", pa.int64())])
    spec = FileSpec(str(tmp_path), ("day",), row_group_rows=1000,
                    schema=pa.schema([("n", pa.int64())]))
    sink = _Sink(spec)
    for i in range(0, 3000, 10):
        sink.add(pa.RecordBatch.from_pylist([{"day": (i + j) % 30, "n": i + j}
                                             for j in range(10)], schema=schema))
        assert len(sink.files) <= _OPEN_FILES
    done = sink.close()
    assert sum(a["num_records"] for a in done) == 3000
    got = sorted(n for a in done for n in pq.read_table(tmp_path / a["path"]).column("n")
                 .to_pylist())
    assert got == list(range(3000))
