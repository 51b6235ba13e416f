"""``bronze/files`` compaction: superseded state rows deleted, every file's latest state kept.

On the embedded engine (Sail) in-process, then as real ``binlake`` processes next to a writer
that appends state rows without the ``bronze`` lease (the stream's own ``StreamFiles``), and
killed with SIGKILL mid-compaction.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.bronze.files import (DROPPED, FileState, compact_states, compaction_due,
                                    load_states, save_states)
from pipelines.lake.tables import BRONZE_FILES, Lake
from tests.support.lake_runs import (ROOT, SAMPLE_FILES, SAMPLES, _env, binlake, finish, start,
                                     wait_for)

pytestmark = [pytest.mark.spark]

SAMPLE_ROW_CHANGES = 340  # samples/binlogs/README.md


def _rows(spark, lake: Path, version: int | None = None) -> int:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(str(lake / "bronze" / "files")).count()


def _grow(spark, lake: Lake, files: int, saves: int, *, first: int = 0) -> None:
    """``saves`` rounds of states for ``files`` files: in_progress, partial, …, an outcome."""
    for n in range(first, first + saves):
        states = []
        for i in range(files):
            status = "in_progress" if n % 3 == 0 else ("partial" if n % 3 == 1 else "completed")
            if i == 1 and n == first + saves - 1:
                status = "failed"
            states.append(FileState("src", f"bin.{i + 1:06d}", f"/binlogs/bin.{i + 1:06d}",
                                    100 * n + i, status, events=n * 10 + i, row_changes=n + i,
                                    last_pos=4 + n * 100 + i,
                                    error="bad event" if status == "failed" else None))
        save_states(spark, lake, states)


def _versions(table: Path) -> list[dict]:
    """Per commit of the table's log: its operation and whether it added ``live-bin`` rows."""
    out = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        op, live = "", False
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                op = action["commitInfo"].get("operation", "")
            stats = json.loads((action.get("add") or {}).get("stats") or "{}")
            live = live or str(stats.get("minValues", {}).get("binlog_file", "")).startswith(
                "live-bin")
        out.append({"version": int(f.stem), "op": op, "live": live})
    return out


def test_compaction_due_rule() -> None:
    assert not compaction_due(0, 0)
    assert not compaction_due(2 * 50 + 100, 50)  # a bronze run leaves two rows per file
    assert compaction_due(2 * 50 + 101, 50)
    assert compaction_due(51, 50, force=True)
    assert not compaction_due(50, 50, force=True)


def test_growth_then_compaction_keeps_each_files_latest_state(spark, tmp_path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    path = tmp_path / "lake" / "bronze" / "files"
    _grow(spark, lake, 20, 6)
    assert compact_states(spark, lake) is None, "120 rows for 20 files: not due yet"
    _grow(spark, lake, 20, 6, first=6)
    dropped = FileState("src", "bin.000020", "/binlogs/bin.000020", 0, DROPPED)
    save_states(spark, lake, [dropped])
    before = load_states(spark, lake)
    assert len(before) == 19 and before[("src", "bin.000002")].status == "failed"
    version = lake.version(spark, BRONZE_FILES)
    assert _rows(spark, tmp_path / "lake") == 241

    done = compact_states(spark, lake)

    assert done is not None and (done.rows_before, done.rows_after, done.files) == (241, 20, 20)
    after = load_states(spark, lake)
    assert after == before  # status, size, positions, row changes, error, updated_at
    assert after[("src", "bin.000002")].error == "bad event"
    assert ("src", "bin.000020") not in after  # its latest row, `dropped`, is kept
    assert _rows(spark, tmp_path / "lake") == 20
    assert _rows(spark, tmp_path / "lake", version) == 241, "old rows stay in time travel"
    assert compact_states(spark, lake) is None
    assert compact_states(spark, lake, force=True) is None, "nothing superseded"
    assert (path / "_delta_log").is_dir()


def test_a_failing_compaction_is_a_warning_for_a_run_and_an_error_for_optimize(
        spark, tmp_path, caplog) -> None:
    lake = Lake(str(tmp_path / "lake"))
    _grow(spark, lake, 10, 13)  # 130 rows for 10 files: due
    for data in (tmp_path / "lake" / "bronze" / "files").glob("*.parquet"):
        data.unlink()  # its data files gone: the table's rows cannot be read
    with pytest.raises(Exception):
        compact_states(spark, lake)
    assert compact_states(spark, lake, strict=False) is None
    assert "bronze/files: compaction failed, left to the next run" in caplog.text


def _appender(lake: Path, stop: Path, files: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.state_appender", str(lake), "live", str(files),
         str(stop), "0.3"], cwd=ROOT, env=_env(None), text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)


def test_compaction_during_bronze_run_and_lease_free_appends_loses_no_state(
        spark, tmp_path) -> None:
    """Compaction by a bronze run and by optimize (both under the bronze lease) while a
    stream-like writer appends states without the lease: every file's latest state stays."""
    for round_ in range(2):
        lake = tmp_path / f"round{round_}" / "lake"
        lake.parent.mkdir()
        rc, out, err = binlake(lake, "bronze", "--binlog-dir", str(SAMPLES), "--files",
                               ",".join(SAMPLE_FILES[:2]))
        assert rc == 0, err
        _grow(spark, Lake(str(lake)), 60, 5)
        grown = {k: st for k, st in load_states(spark, Lake(str(lake))).items() if k[0] == "src"}
        stop = tmp_path / f"round{round_}" / "stop"
        table = lake / "bronze" / "files"
        writes = len(_versions(table))
        appender = _appender(lake, stop, 40)
        assert wait_for(lambda: sum(v["live"] for v in _versions(table)) >= 2, 300, 0.1)
        assert len(_versions(table)) > writes
        bronze = start(lake, "-v", "bronze", "--binlog-dir", str(SAMPLES), "--files",
                       ",".join(SAMPLE_FILES[2:]))
        optimize = start(lake, "-v", "optimize", "--tables", "bronze/files")
        results = [finish(bronze), finish(optimize)]
        stop.touch()
        rc, out, err = finish(appender)
        assert rc == 0, err
        for code, o, e in results:
            assert code == 0, o + e
        compacted = [line for _, o, _ in results for line in o.splitlines()
                     if "bronze/files compacted" in line or "superseded state rows" in line]
        assert compacted, [o for _, o, _ in results]

        log = _versions(table)
        deletes = [v["version"] for v in log if v["op"] == "DELETE"]
        live = [v["version"] for v in log if v["live"]]
        assert deletes and live[0] < deletes[0] < live[-1], "the appends overlap compaction"
        states = load_states(spark, Lake(str(lake)))
        mine = {n: st for (s, n), st in states.items() if s == "default"}
        assert sorted(mine) == SAMPLE_FILES
        assert all(st.status == "completed" for st in mine.values())
        assert sum(st.row_changes for st in mine.values()) == SAMPLE_ROW_CHANGES
        last = [json.loads(line) for line in out.splitlines()]
        assert len(last) == 40
        for want in last:
            st = states[("live", want["file"])]
            assert (st.status, st.last_pos, st.row_changes) == (
                want["status"], want["last_pos"], want["row_changes"]), want
        assert len(grown) == 60 and {k: states[k] for k in grown} == grown


def test_kill_9_mid_compaction_leaves_every_files_latest_state(spark, tmp_path) -> None:
    """SIGKILL at several moments after `optimize` took the lease (its compaction commits
    within about half a second of it), each on a fresh copy of a grown table."""
    grown = tmp_path / "grown" / "lake"
    _grow(spark, Lake(str(grown)), 400, 12)
    want = load_states(spark, Lake(str(grown)))
    assert _rows(spark, grown) == 4800
    outcomes = []
    for delay in (0.1, 0.25, 0.4, 0.6):
        lake = tmp_path / f"kill{delay}" / "lake"
        shutil.copytree(grown, lake)
        leases = lake / "_binlake" / "leases" / "bronze"
        proc = start(lake, "optimize", "--tables", "bronze/files")
        assert wait_for(lambda: any(leases.glob("*.json")) or proc.poll() is not None, 300,
                        0.02)
        assert proc.poll() is None, finish(proc)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcomes.append(_rows(spark, lake))
        assert load_states(spark, Lake(str(lake))) == want, f"killed after {delay}s"
        assert outcomes[-1] in (4800, 400), outcomes  # the old table or the compacted one
    rc, out, err = binlake(lake, "--wait", "0", "optimize", "--tables", "bronze/files")
    assert rc == 0, err
    assert load_states(spark, Lake(str(lake))) == want
    assert _rows(spark, lake) == 400


def test_a_bronze_run_compacts_when_due_and_says_so(spark, tmp_path, capsys) -> None:
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    _grow(spark, Lake(str(lake)), 30, 6)  # 180 rows for 30 files: due (> 2 * 30 + 100)
    want = load_states(spark, Lake(str(lake)))
    capsys.readouterr()
    assert main(["--lake", str(lake), "bronze", "--binlog-dir", str(SAMPLES), "--files",
                 SAMPLE_FILES[0]]) == 0
    out = capsys.readouterr().out
    assert "bronze: bronze/files compacted: 182 -> 31 rows for 31 file(s)" in out, out
    states = load_states(spark, Lake(str(lake)))
    assert {k: v for k, v in states.items() if k[0] == "src"} == want
    assert states[("default", SAMPLE_FILES[0])].status == "completed"
    assert main(["--lake", str(lake), "bronze", "--binlog-dir", str(SAMPLES), "--files",
                 SAMPLE_FILES[0]]) == 0
    assert "compacted" not in capsys.readouterr().out, "not due again"
