"""The small tables every run reads whole stay in a few data files (``pipelines/lake/few_files.py``).

On the embedded engine (Sail), with delta-rs rewriting the files: a bound crossed compacts
to one file with the same rows; ``binlake bronze`` and ``binlake quality`` runs keep
``bronze/files`` and ``quality/results`` under the bound (each grew a file per run before);
a compaction racing a writer that appends without the lease (the stream's ``StreamFiles``,
in a process of its own) loses and doubles no row.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipelines.bronze.files import FileState, load_states, save_states
from pipelines.config import load_config
from pipelines.lake.few_files import FEW_FILES, keep_few_files
from pipelines.lake.tables import BRONZE_FILES, QUALITY_RESULTS, Lake
from pipelines.quality import run_quality
from pipelines.stream.files_state import StreamFiles
from tests.support.lake_runs import (ROOT, SAMPLE_FILES, SAMPLES, _env, binlake, finish,
                                     hold_lease, together, wait_for)

pytestmark = [pytest.mark.spark]


def _save(spark, lake: Lake, saves: int, files: int = 3, first: int = 0) -> None:
    """``saves`` appends (one data file each) of a state for each of ``files`` files."""
    for n in range(first, first + saves):
        save_states(spark, lake, [FileState("src", f"bin.{i + 1:06d}", f"/b/bin.{i + 1:06d}",
                                            100 * n + i, "partial", last_pos=4 + n, events=n)
                                  for i in range(files)])


def _data_files(path: Path) -> int:
    return len(DeltaTable(str(path)).file_uris())


def _bag(spark, path: Path) -> Counter:
    return Counter(repr(tuple(r)) for r in spark.read.format("delta").load(str(path)).collect())


def test_past_the_bound_the_table_becomes_one_file_with_the_same_rows(spark, tmp_path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    table = tmp_path / "lake" / "bronze" / "files"
    assert keep_few_files(spark, lake, BRONZE_FILES) is None, "no table yet"
    _save(spark, lake, FEW_FILES)
    version = DeltaTable(str(table)).version()
    assert keep_few_files(spark, lake, BRONZE_FILES) is None, "at the bound: left as it is"
    assert DeltaTable(str(table)).version() == version and _data_files(table) == FEW_FILES

    _save(spark, lake, 1, first=FEW_FILES)
    rows, states = _bag(spark, table), load_states(spark, lake)
    assert sum(rows.values()) == 3 * (FEW_FILES + 1)

    assert keep_few_files(spark, lake, BRONZE_FILES) == FEW_FILES + 1

    assert _data_files(table) == 1
    assert _bag(spark, table) == rows and load_states(spark, lake) == states
    commit = DeltaTable(str(table)).history(1)[0]
    assert commit["operation"] == "OPTIMIZE" and commit["version"] == version + 2
    assert keep_few_files(spark, lake, BRONZE_FILES) is None


def test_bronze_runs_keep_bronze_files_few(spark, tmp_path) -> None:
    """Each bronze run appends two state files (in_progress, then the outcome): past the
    bound, the run compacts them."""
    lake_dir = tmp_path / "lake"
    lake = Lake(str(lake_dir))
    _save(spark, lake, FEW_FILES - 1)
    for name in SAMPLE_FILES[:2]:
        rc, out, err = binlake(lake_dir, "bronze", "--binlog-dir", str(SAMPLES), "--files", name)
        assert rc == 0, out + err
        assert _data_files(lake_dir / "bronze" / "files") <= FEW_FILES
    states = load_states(spark, lake)
    assert [states[("default", n)].status for n in SAMPLE_FILES[:2]] == ["completed"] * 2
    assert {k[1] for k in states if k[0] == "src"} == {"bin.000001", "bin.000002", "bin.000003"}
    assert states[("src", "bin.000001")].last_pos == 4 + FEW_FILES - 2


def test_a_streams_saves_keep_bronze_files_few(spark, tmp_path) -> None:
    """The stream saves its files' states every batch: every FEW_FILES saves it compacts
    ``bronze/files`` past the bound (silver reads the table whole at every follow)."""
    lake_dir = tmp_path / "lake"
    lake, cfg = Lake(str(lake_dir)), load_config(env={}, overrides={"lake.root": str(lake_dir)})
    table = lake_dir / "bronze" / "files"
    files = StreamFiles(spark, lake, "live", "stream://test", tidy=lambda: keep_few_files(
        spark, lake, BRONZE_FILES, lease=(cfg, "bronze")))
    most = 0
    for n in range(1, 3 * FEW_FILES + 1):
        files.streaming("live-bin.000001", 1000 * n, n)
        files.save()
        most = max(most, _data_files(table))
    assert most < 2 * FEW_FILES and _data_files(table) == 1
    st = load_states(spark, lake)[("live", "live-bin.000001")]
    assert (st.status, st.last_pos, st.row_changes) == ("streaming", 1000 * 3 * FEW_FILES,
                                                        3 * FEW_FILES)
    assert sum(_bag(spark, table).values()) == 3 * FEW_FILES


def test_quality_runs_keep_their_results_few(spark, tmp_path) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    rc, out, err = binlake(tmp_path / "lake", "index", "--binlog-dir", str(SAMPLES), "--files",
                           SAMPLE_FILES[0])
    assert rc == 0, out + err
    results = tmp_path / "lake" / "quality" / "results"
    assert _data_files(results) == 1
    runs = [run_quality(spark, cfg, window="all").run_id for _ in range(FEW_FILES)]
    assert _data_files(results) <= FEW_FILES
    stored = Counter(r["run_id"] for r in spark.read.format("delta").load(str(results))
                     .select("run_id").collect())
    assert set(runs) < set(stored) and len(stored) == FEW_FILES + 1
    assert len(set(stored.values())) == 1, "every run stored its rules once"


def _results_rows(spark, lake: Lake, runs: int) -> None:
    """``runs`` appends (one data file each) of a stored quality run's rows."""
    rows = spark.read.format("delta").load(lake.path(QUALITY_RESULTS)).collect()
    for n in range(runs):
        lake.append(spark.createDataFrame([(f"seeded-{n}", *r[1:]) for r in rows],
                                          QUALITY_RESULTS.ddl()), QUALITY_RESULTS)


def test_quality_compacts_its_results_only_when_it_gets_the_lease(spark, tmp_path) -> None:
    """A compaction of ``quality/results`` holds the ``quality`` lease; a quality run finding
    it held (another quality run, optimize) leaves the compaction to the holder."""
    lake_dir = tmp_path / "lake"
    lake, cfg = Lake(str(lake_dir)), load_config(env={}, overrides={"lake.root": str(lake_dir)})
    rc, out, err = binlake(lake_dir, "index", "--binlog-dir", str(SAMPLES), "--files",
                           SAMPLE_FILES[0])
    assert rc == 0, out + err
    _results_rows(spark, lake, FEW_FILES)
    results = lake_dir / "quality" / "results"
    holder = hold_lease(lake_dir, "quality")
    try:
        assert keep_few_files(spark, lake, QUALITY_RESULTS, lease=(cfg, "quality")) is None
        assert _data_files(results) == FEW_FILES + 1
    finally:
        holder.kill()
        holder.wait()
    rows = _bag(spark, results)
    assert keep_few_files(spark, lake, QUALITY_RESULTS, lease=(cfg, "quality")) == FEW_FILES + 1
    assert _data_files(results) == 1 and _bag(spark, results) == rows


def test_two_quality_runs_at_once_store_each_run_once(spark, tmp_path) -> None:
    lake_dir = tmp_path / "lake"
    lake = Lake(str(lake_dir))
    rc, out, err = binlake(lake_dir, "index", "--binlog-dir", str(SAMPLES), "--files",
                           SAMPLE_FILES[0])
    assert rc == 0, out + err
    _results_rows(spark, lake, FEW_FILES - 1)
    for rc, out, err in together(lake_dir, [["quality", "--window", "all"]] * 2):
        assert rc == 0, out + err
    runs = Counter(r["run_id"] for r in spark.read.format("delta").load(
        lake.path(QUALITY_RESULTS)).select("run_id").collect())
    assert len(runs) == FEW_FILES + 2
    assert len(set(runs.values())) == 1, runs  # each run's rules once: none lost or doubled
    assert _data_files(lake_dir / "quality" / "results") <= 2


def test_compaction_racing_lease_free_appends_loses_and_doubles_nothing(spark, tmp_path) -> None:
    lake_dir = tmp_path / "lake"
    lake = Lake(str(lake_dir))
    table = lake_dir / "bronze" / "files"
    _save(spark, lake, 4)
    stop = tmp_path / "stop"
    appender = subprocess.Popen(
        [sys.executable, "-m", "tests.support.state_appender", str(lake_dir), "live", "5",
         str(stop), "0.05"], cwd=ROOT, env=_env(None), text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: DeltaTable(str(table)).version() >= 5, 300, 0.1)
        compactions, deadline = 0, time.monotonic() + 300
        while compactions < 4 and time.monotonic() < deadline:  # each after an append
            if keep_few_files(spark, lake, BRONZE_FILES, most=1) is None:
                time.sleep(0.05)
            else:
                compactions += 1
    finally:
        stop.touch()
        rc, out, err = finish(appender)
    assert rc == 0, err
    assert compactions == 4
    ops = [c["operation"] for c in reversed(DeltaTable(str(table)).history())]
    first, last = ops.index("OPTIMIZE"), len(ops) - 1 - ops[::-1].index("OPTIMIZE")
    assert any(op != "OPTIMIZE" for op in ops[first:last]), ops  # appends landed between
    rows = _bag(spark, table)
    assert max(rows.values()) == 1, "no row twice"
    saved = [json.loads(line) for line in out.splitlines()]
    assert sum(rows.values()) == 4 * 3 + 5 * saved[0]["rounds"], "no row lost"
    states = load_states(spark, lake)
    for want in saved:
        st = states[("live", want["file"])]
        assert (st.status, st.last_pos, st.row_changes) == (
            want["status"], want["last_pos"], want["row_changes"])
