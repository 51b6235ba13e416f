"""The bronze stage on the embedded engine over real corpus files: idempotence, bad input,
unfinished tails, filters, and a kill -9 at any moment followed by a re-run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config

pytestmark = pytest.mark.spark

# name in the test dir → corpus file (MySQL 5.7, CRC32 and checksum OFF)
FILES = {
    "mysql-bin.000001": "zalora__binlog-parser/data__fixtures__mysql-bin.01",
    "mysql-bin.000002": "zalora__binlog-parser/data__fixtures__mysql-bin.02",
    "mysql-bin.000003": "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32",
}
# Row changes per file as `mariadb-binlog -v` prints them (### INSERT/UPDATE/DELETE blocks).
EXPECTED_ROWS = {"mysql-bin.000001": 10, "mysql-bin.000002": 1, "mysql-bin.000003": 63}


@pytest.fixture
def binlog_dir(tmp_path: Path, corpus: Path) -> Path:
    d = tmp_path / "binlogs"
    d.mkdir()
    for name, src in FILES.items():
        shutil.copy(corpus / src, d / name)
    return d


def cfg_for(tmp_path: Path, **extra):
    return load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"), **extra})


def bronze_counts(spark, cfg) -> dict[str, int]:
    rows = spark.sql(
        "SELECT binlog_file, count(*) AS n FROM delta.`%s` WHERE event_type IN "
        "('INSERT','UPDATE','DELETE') GROUP BY binlog_file" % cfg.table_path("bronze", "binlog_events")
    ).collect()
    return {r["binlog_file"]: r["n"] for r in rows}


def duplicate_keys(spark, cfg) -> int:
    return spark.sql(
        "SELECT count(*) AS n FROM (SELECT binlog_file, start_pos, row_in_event, event_type "
        "FROM delta.`%s` GROUP BY 1, 2, 3, 4 HAVING count(*) > 1)"
        % cfg.table_path("bronze", "binlog_events")).collect()[0]["n"]


def test_index_then_rerun_adds_nothing(spark, tmp_path: Path, binlog_dir: Path) -> None:
    cfg = cfg_for(tmp_path)
    first = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True)
    # 000003 ends with ROTATE; 000001 and 000002 have later files: all are complete.
    assert [f.status for f in first.files] == ["completed", "completed", "completed"]
    assert {f.binlog_file: f.row_changes for f in first.files} == EXPECTED_ROWS
    assert bronze_counts(spark, cfg) == EXPECTED_ROWS
    second = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True)
    assert second.skipped == ["mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"]
    assert second.files == []
    assert bronze_counts(spark, cfg) == EXPECTED_ROWS
    assert duplicate_keys(spark, cfg) == 0


@pytest.fixture
def deletes(monkeypatch) -> list[str]:
    """The DELETEs bronze runs issue on the lake (their predicates)."""
    from pipelines.lake.tables import Lake

    got: list[str] = []
    real = Lake.delete_where

    def counted(self, spark, table, predicate):
        got.append(f"{table.key}: {predicate}")
        return real(self, spark, table, predicate)

    monkeypatch.setattr(Lake, "delete_where", counted)
    return got


def test_a_file_indexed_first_needs_no_delete(spark, tmp_path: Path, binlog_dir: Path,
                                              deletes: list[str]) -> None:
    cfg = cfg_for(tmp_path)
    run_bronze(spark, cfg, binlog_dir=str(binlog_dir), files=["mysql-bin.000001"])
    run_bronze(spark, cfg, binlog_dir=str(binlog_dir), files=["mysql-bin.000002"])
    assert [d for d in deletes if d.startswith("bronze/binlog_events")] == []
    assert bronze_counts(spark, cfg) == {k: EXPECTED_ROWS[k]
                                         for k in ("mysql-bin.000001", "mysql-bin.000002")}


@pytest.mark.parametrize("later_commits", [0, 11])
def test_rows_without_a_file_state_are_replaced_not_doubled(spark, tmp_path: Path,
                                                            binlog_dir: Path,
                                                            deletes: list[str],
                                                            later_commits: int) -> None:
    """A file's rows in the table while ``bronze/files`` has no state for it (the stream's
    commit before it saved its states, killed in between): indexing the file replaces them.
    With ``later_commits`` the log lists their data file in a checkpoint only."""
    cfg = cfg_for(tmp_path)
    run_bronze(spark, cfg, binlog_dir=str(binlog_dir), files=["mysql-bin.000003"])
    events = cfg.table_path("bronze", "binlog_events")
    if later_commits:  # another file's rows, appended one commit at a time, then deleted
        other = spark.read.format("delta").load(events).limit(1) \
            .withColumn("binlog_file", F.lit("mysql-bin.000099"))
        for _ in range(later_commits):
            other.write.format("delta").mode("append").save(events)
        spark.sql(f"DELETE FROM delta.`{events}` WHERE binlog_file = 'mysql-bin.000099'")
        assert os.path.exists(os.path.join(events, "_delta_log", "_last_checkpoint"))
    DeltaTable(cfg.table_path("bronze", "files")).delete("binlog_file = 'mysql-bin.000003'")
    again = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), files=["mysql-bin.000003"])
    assert [f.status for f in again.files] == ["completed"]
    assert len([d for d in deletes if d.startswith("bronze/binlog_events")]) == 1
    assert bronze_counts(spark, cfg) == {"mysql-bin.000003": EXPECTED_ROWS["mysql-bin.000003"]}
    assert duplicate_keys(spark, cfg) == 0


def test_bad_files_fail_alone_and_recover(spark, tmp_path: Path, binlog_dir: Path, corpus: Path) -> None:
    cfg = cfg_for(tmp_path)
    (binlog_dir / "mysql-bin.000004").write_bytes(b"PK\x03\x04 this is a zip, not a binlog")
    good = (binlog_dir / "mysql-bin.000003").read_bytes()
    corrupt = bytearray(good)
    corrupt[400] ^= 0x01  # inside the WRITE_ROWS event at 384: its CRC32 no longer matches
    (binlog_dir / "mysql-bin.000003").write_bytes(bytes(corrupt))
    res = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True)
    by = {f.binlog_file: f for f in res.files}
    assert by["mysql-bin.000001"].status == by["mysql-bin.000002"].status == "completed"
    assert by["mysql-bin.000003"].status == "failed"
    assert "ChecksumError" in by["mysql-bin.000003"].error
    assert "mysql-bin.000003, pos 384" in by["mysql-bin.000003"].error
    # A file named like a binlog that is not one is not selected, so it fails nothing
    # (tests/binlog/test_directory.py); the damaged binlog fails alone.
    assert sorted(by) == ["mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"]
    assert bronze_counts(spark, cfg) == {"mysql-bin.000001": 10, "mysql-bin.000002": 1}
    # Fix the cause and re-run: the failed file completes, nothing is duplicated.
    (binlog_dir / "mysql-bin.000003").write_bytes(good)
    (binlog_dir / "mysql-bin.000004").unlink()
    res = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True)
    assert [f.binlog_file for f in res.files] == ["mysql-bin.000003"]
    assert bronze_counts(spark, cfg) == EXPECTED_ROWS
    assert duplicate_keys(spark, cfg) == 0


def test_missing_table_map_names_position(spark, tmp_path: Path, binlog_dir: Path) -> None:
    data = (binlog_dir / "mysql-bin.000003").read_bytes()
    # Cut the TABLE_MAP at 308 (76 bytes): the WRITE_ROWS after it has no table.
    (binlog_dir / "mysql-bin.000003").write_bytes(data[:308] + data[384:])
    res = run_bronze(spark, cfg_for(tmp_path), binlog_dir=str(binlog_dir), files=["mysql-bin.000003"])
    (st,) = res.files
    assert st.status == "failed" and st.last_pos == 308
    assert "MissingTableMapError" in st.error and "table_id 215" in st.error


def test_unfinished_tail_is_not_an_error(spark, tmp_path: Path, binlog_dir: Path) -> None:
    data = bytearray((binlog_dir / "mysql-bin.000003").read_bytes())
    data[4 + 17] |= 0x01  # FORMAT_DESCRIPTION flags: LOG_EVENT_BINLOG_IN_USE_F (server writing)
    cut = 384 + 50  # half of the WRITE_ROWS event at 384
    (binlog_dir / "mysql-bin.000003").write_bytes(bytes(data[:cut]))
    cfg = cfg_for(tmp_path)
    (st,) = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), files=["mysql-bin.000003"]).files
    assert (st.status, st.last_pos, st.row_changes) == ("partial", 384, 0)
    # The server writes on: the next run picks the file up again, completely.
    (binlog_dir / "mysql-bin.000003").write_bytes(bytes(data))
    (st,) = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), files=["mysql-bin.000003"]).files
    assert st.row_changes == 63 and bronze_counts(spark, cfg) == {"mysql-bin.000003": 63}


def test_schema_and_table_filters(spark, tmp_path: Path, binlog_dir: Path) -> None:
    cfg = cfg_for(tmp_path)
    run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True, tables=["test_db.rooms"])
    rows = spark.sql("SELECT DISTINCT schema_name, table_name FROM delta.`%s` WHERE event_type "
                     "IN ('INSERT','UPDATE','DELETE')" % cfg.table_path("bronze", "binlog_events")
                     ).collect()
    assert [(r[0], r[1]) for r in rows] == [("test_db", "rooms")]


@pytest.mark.parametrize("delay", [0.3, 1.2, 2.5, 4.0])
def test_kill_9_then_rerun_is_exactly_once(spark, tmp_path: Path, binlog_dir: Path, delay: float) -> None:
    lake = tmp_path / "lake"
    cmd = [sys.executable, "-m", "pipelines", "--lake", str(lake), "bronze",
           "--binlog-dir", str(binlog_dir), "--all"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    cfg = cfg_for(tmp_path)
    assert bronze_counts(spark, cfg) == EXPECTED_ROWS
    assert duplicate_keys(spark, cfg) == 0


def test_one_file_split_among_tasks_gives_the_same_bronze(spark, tmp_path: Path) -> None:
    """A file decoded in chunks (transaction boundaries) equals the file decoded whole."""
    samples = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
    d = tmp_path / "one"
    d.mkdir()
    shutil.copy(samples / "mariadb-bin.000003", d / "mariadb-bin.000003")
    cols = ("binlog_file, start_pos, end_pos, row_in_event, gtid, trx_pos, event_type, "
            "row_before, row_after, table_map_hash")
    # Each task writes the TABLE_MAP facts its row changes name once: compared distinct.
    facts = ("table_map_hash, schema_name, table_name, column_count, column_types, column_meta, "
             "column_nullable, column_names, column_unsigned, column_charsets, primary_key, "
             "enum_values, set_values")
    results = {}
    variants = (("whole", {}), ("split", {"bronze.parallelism": 4, "bronze.min_chunk_mb": 0}),
                # 30 KB per commit: the 95 KB file in chunks of 15 KB, two per commit
                ("commits", {"bronze.parallelism": 2, "bronze.min_chunk_mb": 0,
                             "bronze.commit_mb": 0.03}))
    for label, extra in variants:
        cfg = cfg_for(tmp_path / label, **extra)
        (st,) = run_bronze(spark, cfg, binlog_dir=str(d), all_files=True).files
        table = f"delta.`{cfg.table_path('bronze', 'binlog_events')}`"
        rows = spark.sql(f"SELECT {cols} FROM {table} "
                         "WHERE event_type NOT IN ('END', 'ERROR', 'TABLE_MAP')").collect()
        maps = spark.sql(f"SELECT DISTINCT {facts} FROM {table} "
                         "WHERE event_type = 'TABLE_MAP'").collect()
        results[label] = (st.status, st.events, st.row_changes, st.last_pos,
                          sorted(tuple(map(repr, r)) for r in rows),
                          sorted(tuple(map(repr, r)) for r in maps))
        closing = spark.sql(f"SELECT count(*) AS n FROM delta.`{cfg.table_path('bronze', 'binlog_events')}` "
                            "WHERE event_type = 'END'").collect()[0]["n"]
        assert closing == {"whole": 1, "split": 4, "commits": 7}[label]
        if label == "commits":  # the delete of nothing, then one append per two chunks
            assert len(DeltaTable(cfg.table_path("bronze", "binlog_events")).history()) == 4
    assert results["split"] == results["whole"]
    assert results["commits"] == results["whole"]
    assert results["whole"][2] == 295  # mariadb-binlog -v: 295 row changes in this file
    assert len(results["whole"][5]) == 3  # its three tables' TABLE_MAPs


def test_one_file_waves_write_the_same_bronze(spark, tmp_path: Path, binlog_dir: Path) -> None:
    """A commit of one file's tasks is written with its partition values as literals (no sort
    by them: ``with_file_literals``); a commit of several files is not. Both give the same
    rows, column for column."""

    from pipelines.bronze.job import with_file_literals

    frame = spark.range(2).select(F.lit("x").alias("source_id"), F.lit("f").alias("binlog_file"))
    assert with_file_literals(frame, "s", ["/a/f.1", "/b/f.2"]) is frame
    assert with_file_literals(frame, "s", ["/a/f.1", "/a/f.1"]).collect() == \
        [("s", "f.1")] * 2
    rows = {}
    for label, commit_mb in (("together", 0), ("one_by_one", 0.001)):
        cfg = cfg_for(tmp_path / label, **{"bronze.commit_mb": commit_mb})
        assert not run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True).failed
        table = spark.read.format("delta").load(cfg.table_path("bronze", "binlog_events"))
        rows[label] = sorted(tuple(map(repr, r)) for r in table.collect())
        assert bronze_counts(spark, cfg) == EXPECTED_ROWS  # mariadb-binlog -v, per file
        # the table's schema is not the literals' (NOT NULL): the first commit, which
        # creates the table, is written without them
        fields = {f.name: f.nullable for f in
                  DeltaTable(cfg.table_path("bronze", "binlog_events")).schema().fields}
        assert fields["source_id"] and fields["binlog_file"]
    assert rows["one_by_one"] == rows["together"]


def test_incident_is_recorded_and_shown_as_a_gap(spark, tmp_path: Path, corpus: Path, capsys) -> None:
    from pipelines.cli.main import main

    d = tmp_path / "inc"
    d.mkdir()
    # MySQL's own test file with an INCIDENT event (MANIFEST: INCIDENT(26)=1).
    shutil.copy(corpus / "blackbeam__rust_mysql_common/test-data__binlogs__bug40482-bin.000001",
                d / "bug40482-bin.000001")
    lake = str(tmp_path / "lake")
    assert main(["--lake", lake, "bronze", "--binlog-dir", str(d), "--all"]) == 0
    capsys.readouterr()
    assert main(["--lake", lake, "status"]) == 0
    out = capsys.readouterr().out
    assert "GAP: INCIDENT at default/bug40482-bin.000001 pos" in out


def test_unguarded_script_decodes_without_forked_workers(tmp_path: Path) -> None:
    """A plain script without a ``__main__`` guard (multiprocessing would re-run it in every
    forked worker) calls the bronze stage: it must fall back to spawned workers and work."""
    samples = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
    script = tmp_path / "job.py"
    script.write_text(
        "from pipelines.bronze.job import run_bronze\n"
        "from pipelines.config import load_config\n"
        "from pipelines.engine.session import get_spark\n"
        # inline_max_mb 0: the sample files are small enough to decode in the task's process
        f"cfg = load_config(env={{}}, overrides={{'lake.root': {str(tmp_path / 'lake')!r}, "
        "'bronze.inline_max_mb': 0})\n"
        f"res = run_bronze(get_spark(cfg.engine), cfg, binlog_dir={str(samples)!r}, all_files=True)\n"
        "print('ROWS', res.row_changes, [f.status for f in res.files])\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ROWS 340 ['completed', 'completed', 'completed', 'completed', 'completed']" in proc.stdout
    # ... and say once why its workers start slowly, naming the script and the remedy.
    said = [line for line in proc.stderr.splitlines() if "__main__" in line]
    assert len(said) == 1 and str(script) in said[0] and "guard" in said[0], proc.stderr[-2000:]
