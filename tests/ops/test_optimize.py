"""``binlake optimize``: fewer files, the same rows, time travel and exactly-once unaffected.

The lake is the shipped sample binlogs indexed one file per run on the embedded engine (Sail),
so every table gets one small file per run, as a stream or many small binlogs leave them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from pipelines.cli.main import main
from pipelines.lake.delta_ops import files_added
from pipelines.silver.job import KEY

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
FILES = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))


def _index(lake: str, *files: str, extra: tuple[str, ...] = ()) -> None:
    for name in files:
        assert main(["--lake", lake, "index", "--binlog-dir", str(SAMPLES), "--files", name,
                     *extra]) == 0


def _optimize(lake: str, capsys) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["--lake", lake, "optimize", "--format", "json"]) == 0
    return {t["table"]: t for t in json.loads(capsys.readouterr().out)}


def _rows(spark, path: str, version: int | None = None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def _bag(df) -> Counter:
    """The DataFrame's rows as a multiset (the test lakes are small)."""
    return Counter(repr(tuple(r)) for r in df.collect())


@pytest.mark.spark
def test_optimize_keeps_rows_time_travel_and_exactly_once(spark, tmp_path: Path, capsys) -> None:
    lake = str(tmp_path / "lake")
    _index(lake, *FILES[:3])
    silver = str(tmp_path / "lake" / "silver" / "binlog_events")
    bronze = str(tmp_path / "lake" / "bronze" / "binlog_events")
    before = {p: DeltaTable(p).version() for p in (silver, bronze)}
    files_before = len(DeltaTable(silver).file_uris())
    assert files_before >= 3  # one file per silver run at least
    silver_rows = _bag(_rows(spark, silver))
    bronze_rows = _bag(_rows(spark, bronze))

    done = _optimize(lake, capsys)
    s = done["silver/binlog_events"]
    assert (s["how"], s["via"]) == ("z-order", "delta-rs")
    assert s["files_before"] == files_before and s["files_after"] < files_before
    assert done["bronze/binlog_events"]["how"] in ("compact", "unchanged")
    assert DeltaTable(silver).history(1)[0]["operation"] == "OPTIMIZE"
    # Optimize again at once: a no-op on every table, no commit anywhere.
    again = _optimize(lake, capsys)
    assert {t["how"] for t in again.values()} == {"unchanged"}
    assert all(t["version_after"] == t["version_before"] for t in again.values())

    # The same rows, keys and seq; the pre-optimize version still reads the same.
    assert _bag(_rows(spark, silver)) == silver_rows
    assert _bag(_rows(spark, bronze)) == bronze_rows
    assert _bag(_rows(spark, silver, before[silver])) == silver_rows
    assert _bag(_rows(spark, bronze, before[bronze])) == bronze_rows
    keys = _rows(spark, silver).groupBy(*KEY).count()
    assert keys.where("count > 1").count() == 0

    # A key lookup skips by statistics and the pk_hash bloom filter: a key silver does not
    # hold (between two that it does) reads no row group.
    row = _rows(spark, silver).where("event_type = 'UPDATE'").first()
    absent = row["pk_hash"][:-1] + ("0" if row["pk_hash"][-1] != "0" else "1")
    plan = spark.sql(f"EXPLAIN ANALYZE SELECT * FROM delta.`{silver}` WHERE schema_name = "
                     f"'{row['schema_name']}' AND table_name = '{row['table_name']}' AND "
                     f"pk_hash = '{absent}'").collect()[0][0]
    bloom = re.search(r"row_groups_pruned_bloom_filter=(\d+) total → (\d+) matched", plan)
    assert bloom and int(bloom.group(1)) >= 1 and bloom.group(2) == "0", plan[-3000:]

    # A re-run of the stages after optimize adds nothing; optimize again commits nothing.
    version = DeltaTable(silver).version()
    capsys.readouterr()
    assert main(["--lake", lake, "index", "--binlog-dir", str(SAMPLES), "--files",
                 ",".join(FILES[:3])]) == 0
    assert " 0 row changes appended" in capsys.readouterr().out
    assert DeltaTable(silver).version() == version
    again = _optimize(lake, capsys)
    assert again["silver/binlog_events"]["how"] == again["bronze/binlog_events"]["how"] == "unchanged"
    assert DeltaTable(silver).version() == version

    # New files: only their partitions are rewritten, and the rows are all there once.
    _index(lake, *FILES[3:])
    more = _optimize(lake, capsys)["silver/binlog_events"]
    assert more["how"] == "z-order" and more["partitions"] >= 1
    total = _rows(spark, silver)
    assert total.count() == 340  # samples/binlogs/README.md: 340 row changes
    assert total.groupBy(*KEY).count().where("count > 1").count() == 0


def test_files_added_skips_optimize_rewrites(tmp_path: Path) -> None:
    """What gold exports between two silver versions: appended rows only, never the rows an
    OPTIMIZE rewrote, and appended rows that an OPTIMIZE then rewrote still exactly once."""
    path = str(tmp_path / "t")

    def append(lo: int, hi: int) -> None:
        write_deltalake(path, pa.table({"k": list(range(lo, hi)), "p": ["a"] * (hi - lo)}),
                        mode="append", partition_by=["p"])

    def rows(files) -> list[int]:
        return sorted(k for f in files for k in pa.parquet.read_table(f)["k"].to_pylist())

    import pyarrow.parquet  # noqa: F401 - pa.parquet

    append(0, 10)          # v0
    append(10, 20)         # v1
    DeltaTable(path).optimize.compact()  # v2: rewrites v0+v1's rows into one file
    append(20, 25)         # v3
    assert DeltaTable(path).history(2)[1]["operation"] == "OPTIMIZE"
    assert rows(files_added(path, 0, 3)) == list(range(10, 25))
    assert rows(files_added(path, 1, 2)) == []
    assert rows(files_added(path, 2, 3)) == list(range(20, 25))
    assert rows(files_added(path, 0, 1)) == list(range(10, 20))


@pytest.mark.spark
@pytest.mark.mariadb
def test_gold_after_optimize_exports_only_new_rows(spark, tmp_path: Path, capsys) -> None:
    from devtools.mariadb import MariaDBServer

    lake = str(tmp_path / "lake")
    with MariaDBServer() as gold:
        dsn = gold.dsn("binlake_gold")
        _index(lake, *FILES[:3], extra=("--gold-dsn", dsn))
        first = gold.execute("SELECT count(*) FROM binlake_gold.binlog_events")[0][0]
        _index(lake, *FILES[3:])  # silver only
        silver = str(tmp_path / "lake" / "silver" / "binlog_events")
        assert _optimize(lake, capsys)["silver/binlog_events"]["how"] == "z-order"
        capsys.readouterr()
        assert main(["--lake", lake, "gold", "--gold-dsn", dsn]) == 0
        out = capsys.readouterr().out
        n = gold.execute("SELECT count(*) FROM binlake_gold.binlog_events")[0][0]
        assert n == _rows(spark, silver).count() == 340
        # Incremental: gold read only the rows appended after its watermark.
        assert "(incremental" in out and f"{340 - first} rows read, {340 - first} inserted" in out, out
