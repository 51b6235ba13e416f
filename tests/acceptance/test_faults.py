"""Faults with the real components: each ends with a clear error naming what is wrong,
``binlake status`` showing it, and the documented repair (docs/repair.md) restoring exactly
once.

Lake damage (a data file deleted or truncated, a torn ``_delta_log`` commit), the lake's disk
full during a bronze write (a small tmpfs), the gold server stopped mid-export and started
again, the source server restarted mid-stream.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from pipelines.lake.delta_ops import current_version
from tests.support.lake_runs import (SAMPLE_FILES, SAMPLES, assert_bronze_once,
                                     assert_silver_once, binlake, start, finish, wait_for)

pytestmark = [pytest.mark.spark]

SAMPLE_ROW_CHANGES = 340
BRONZE_ALL = ["bronze", "--binlog-dir", str(SAMPLES), "--all"]


def _ok(run) -> str:
    rc, out, err = run
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    return out


@pytest.fixture(scope="module")
def silver_lake(tmp_path_factory) -> Path:
    """Bronze of the samples in two runs, silver after each: two commits per table."""
    lake = tmp_path_factory.mktemp("silver") / "lake"
    half = ",".join(SAMPLE_FILES[:2])
    _ok(binlake(lake, "bronze", "--binlog-dir", str(SAMPLES), "--files", half))
    _ok(binlake(lake, "silver"))
    _ok(binlake(lake, *BRONZE_ALL))
    _ok(binlake(lake, "silver"))
    return lake


def _copy(lake: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    shutil.copytree(lake, dest / "lake")
    return dest / "lake"


def _status(lake: Path) -> tuple[dict, str]:
    st = json.loads(_ok(binlake(lake, "status", "--format", "json")))
    return st, _ok(binlake(lake, "status"))


def _repair_and_rerun(spark, lake: Path) -> str:
    out = _ok(binlake(lake, "repair"))
    for line in out.splitlines():
        if line.startswith("repair: next: binlake bronze"):
            _ok(binlake(lake, *line.split("binlake ", 1)[1].split()))
    _ok(binlake(lake, "silver"))
    assert assert_bronze_once(spark, lake, SAMPLE_FILES) == SAMPLE_ROW_CHANGES
    assert assert_silver_once(spark, lake) == SAMPLE_ROW_CHANGES
    st, text = _status(lake)
    assert st["faults"] == [] and "FAULT" not in text
    return out


def _data_files(table: Path, pattern: str = "**/*.parquet") -> list[Path]:
    return sorted(p for p in table.glob(pattern) if "_delta_log" not in p.parts)


@pytest.mark.parametrize("layer", ["bronze", "silver"])
@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_damaged_data_file_is_named_shown_and_repaired(spark, tmp_path, silver_lake,
                                                       layer, damage) -> None:
    lake = _copy(silver_lake, tmp_path / "lake")
    table = lake / layer / "binlog_events"
    victim = max(_data_files(table), key=lambda p: p.stat().st_size)
    if damage == "delete":
        victim.unlink()
    else:
        with open(victim, "r+b") as fh:
            fh.truncate(victim.stat().st_size // 2)
    rc, out, err = binlake(lake, "silver")
    assert rc == 1
    assert victim.name in err and f"{layer}/binlog_events" in err and "binlake repair" in err
    assert ("missing" if damage == "delete" else "truncated") in err
    st, text = _status(lake)
    assert [f["file"] for f in st["faults"]] == [str(victim)]
    assert f"FAULT {layer}/binlog_events" in text and "repair:" in text
    out = _repair_and_rerun(spark, lake)
    if layer == "bronze":
        assert "next: binlake bronze" in out


@pytest.mark.parametrize("table,how", [("bronze/binlog_events", "cut"),
                                       ("bronze/files", "garbage"),
                                       ("silver/binlog_events", "cut")])
def test_torn_latest_commit_is_named_shown_and_repaired(spark, tmp_path, silver_lake,
                                                        table, how) -> None:
    lake = _copy(silver_lake, tmp_path / "lake")
    commit = sorted((lake / table / "_delta_log").glob("*.json"))[-1]
    data = commit.read_bytes()
    commit.write_bytes(data[: len(data) // 2] if how == "cut" else b"\x00\x17garbage\n")
    rc, out, err = binlake(lake, "silver")
    assert rc == 1 and commit.name in err and table in err, err
    st, text = _status(lake)
    assert any(f["kind"] == "torn_commit" and f["file"] == str(commit) for f in st["faults"])
    assert f"FAULT {table}: _delta_log commit {commit.name}" in text
    _repair_and_rerun(spark, lake)
    assert list((lake / "_binlake" / "damaged").glob(f"*/{table}/_delta_log/{commit.name}"))


def test_a_table_killed_before_its_first_commit_is_created_by_the_rerun(spark, tmp_path) -> None:
    """kill -9 while a stage creates a table can leave its _delta_log with no commit: nothing
    was written, so the re-run creates the table (it said "the lake is damaged" and stopped)."""
    lake = tmp_path / "lake"
    (lake / "bronze" / "files" / "_delta_log").mkdir(parents=True)
    _ok(binlake(lake, *BRONZE_ALL))
    assert_bronze_once(spark, lake, SAMPLE_FILES)


def test_torn_commit_that_is_not_the_latest_is_refused_by_name(tmp_path, silver_lake) -> None:
    lake = _copy(silver_lake, tmp_path / "lake")
    commit = sorted((lake / "silver/binlog_events/_delta_log").glob("*.json"))[0]
    commit.write_bytes(b"{not json")
    rc, out, err = binlake(lake, "repair")
    assert rc == 1 and commit.name in err and "cannot be repaired automatically" in err
    assert commit.exists()


# -- the lake's disk full during a bronze write ---------------------------------------------

def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                   check=True)


def test_disk_full_during_bronze_is_named_then_a_rerun_is_exactly_once(spark, tmp_path) -> None:
    mnt = tmp_path / "small"
    _mount_tmpfs(mnt, "4m")
    try:
        lake = mnt / "lake"
        half = ",".join(SAMPLE_FILES[:2])
        _ok(binlake(lake, "bronze", "--binlog-dir", str(SAMPLES), "--files", half))
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as fh:  # fill it: the next bronze write runs out
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        os.truncate(filler, filler.stat().st_size - 32 * 1024)  # room for the lease, not the rows
        rc, out, err = binlake(lake, *BRONZE_ALL)
        assert rc == 1, out + err
        assert "disk is full" in err and str(lake) in err, err
        _, full_text = _status_when_full(lake)
        assert "INTERRUPTED bronze run" in full_text, full_text  # status names the run
        filler.unlink()
        st, text = _status(lake)
        assert "INTERRUPTED bronze run" in text, text
        _ok(binlake(lake, *BRONZE_ALL))
        assert assert_bronze_once(spark, lake, SAMPLE_FILES) == SAMPLE_ROW_CHANGES
        _ok(binlake(lake, "silver"))
        assert assert_silver_once(spark, lake) == SAMPLE_ROW_CHANGES
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _status_when_full(lake: Path) -> tuple[int, str]:
    """``status`` still answers on a full disk (it writes nothing)."""
    rc, out, err = binlake(lake, "status")
    assert rc == 0, err
    return rc, out


# -- servers going away -------------------------------------------------------------------

def _gold_keys(server, db: str) -> list[tuple]:
    return [tuple(r) for r in server.execute(
        "SELECT source_id, binlog_file, start_pos, row_in_event FROM binlog_events", db=db)]


def _silver_keys(spark, lake: Path) -> set[tuple]:
    return {tuple(r) for r in spark.read.format("delta").load(
        str(lake / "silver" / "binlog_events")).select(
        "source_id", "binlog_file", "start_pos", "row_in_event").collect()}


@pytest.mark.mariadb
def test_gold_server_stopped_mid_export_then_started_again(spark, tmp_path, silver_lake) -> None:
    from devtools.mariadb import MariaDBServer
    from tests.support.lake_runs import start_server_again, stop_server

    lake = _copy(silver_lake, tmp_path / "lake")
    db = "gold_fault"
    with MariaDBServer(keep=True, workdir=tmp_path / "gold-server") as server:
        dsn = server.dsn(db)
        password = dsn.split("@")[0].rsplit(":", 1)[-1]
        _ok(binlake(lake, "init", "--gold-dsn", dsn))
        # One row per transaction: slow enough to stop the server in the middle.
        env = {"BINLAKE_GOLD_BATCH_ROWS": "1", "BINLAKE_GOLD_METHOD": "insert",
               "BINLAKE_GOLD_PARALLELISM": "1"}
        proc = start(lake, "gold", "--gold-dsn", dsn, env=env)

        def some_rows() -> bool:
            try:
                return server.execute("SELECT COUNT(*) FROM binlog_events", db=db)[0][0] > 5
            except Exception:  # noqa: BLE001 - not created yet
                return False

        assert wait_for(some_rows, 600, 0.02)
        stop_server(server)
        rc, out, err = finish(proc)
        assert rc == 1, out + err
        assert "gold export to mysql://root:***@127.0.0.1" in err and "watermark stays" in err
        assert password not in out + err
        rc, text, serr = binlake(lake, "--wait", "5", "status", env={"BINLAKE_GOLD_DSN": dsn})
        assert rc == 0, serr
        gold_line = next(line for line in text.splitlines() if line.startswith("gold:"))
        assert "127.0.0.1" in gold_line and password not in text
        assert "watermark" not in gold_line  # the server is away: an error, not a watermark
        start_server_again(server)
        rows_before = len(_gold_keys(server, db))
        assert 0 < rows_before < SAMPLE_ROW_CHANGES, "the stop happened mid-export"
        _ok(binlake(lake, "gold", "--gold-dsn", dsn))
        gold = _gold_keys(server, db)
        assert len(gold) == len(set(gold)) == SAMPLE_ROW_CHANGES
        assert set(gold) == _silver_keys(spark, lake)
        rc, text, _ = binlake(lake, "status", env={"BINLAKE_GOLD_DSN": dsn})
        version = current_version(str(lake / "silver" / "binlog_events"))
        assert f"watermark silver v{version} (completed" in text, text


@pytest.mark.mariadb
def test_source_restarted_mid_stream_resumes_exactly_once(spark, tmp_path) -> None:
    from devtools.mariadb import MariaDBServer
    from tests.support.lake_runs import start_server_again, stop_server

    lake = tmp_path / "lake"
    lake.mkdir()
    with MariaDBServer(keep=True, workdir=tmp_path / "source") as server:
        server.execute("CREATE DATABASE app")
        server.execute("CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20))")
        env = {"BINLAKE_SOURCE_DSN": server.dsn(), "BINLAKE_STREAM_BATCH_INTERVAL_MS": "200",
               "BINLAKE_STREAM_SILVER_LAG_SECONDS": "2", "BINLAKE_STREAM_READ_TIMEOUT_SECONDS": "4",
               "BINLAKE_STREAM_HEARTBEAT_SECONDS": "1", "BINLAKE_STREAM_RECONNECT_MAX_SECONDS": "2"}
        proc = start(lake, "-v", "stream", "--server-id", "4343", env=env)

        def live_state() -> dict:
            from pipelines.stream.progress import live_path, read_live

            return read_live(live_path(str(lake), "default")) or {}

        assert wait_for(lambda: live_state().get("state") == "running", 600, 0.2)
        for i in range(50):
            server.execute("INSERT INTO app.t VALUES (%s, %s)", (i, f"before {i}"))
        time.sleep(1.0)
        stop_server(server)
        assert wait_for(lambda: live_state().get("state") == "reconnecting", 120, 0.2)
        rc, text, err = binlake(lake, "status")
        assert rc == 0 and "reconnecting" in text and "last error" in text, text + err
        start_server_again(server)
        for i in range(50, 100):
            server.execute("INSERT INTO app.t VALUES (%s, %s)", (i, f"after {i}"))
        server.execute("UPDATE app.t SET v = 'changed' WHERE id < 10")
        want = {tuple(r) for r in server.execute("SELECT id, v FROM app.t")}
        file, pos = server.execute("SHOW MASTER STATUS")[0][:2]

        def caught_up() -> bool:
            st = live_state()
            return (st.get("state") == "running"
                    and (st.get("file") or "", st.get("pos") or 0) >= (file, pos))

        assert wait_for(caught_up, 300, 0.2), live_state()
        proc.terminate()
        rc, out, err = finish(proc)
        assert rc == 0, out + err[-3000:]
    _ok(binlake(lake, "silver"))
    assert assert_silver_once(spark, lake) == 110
    # Replay silver's after-images in order: equal to the server's SELECT.
    rows = spark.sql(
        f"SELECT binlog_file, start_pos, row_in_event, event_type, row_after FROM "
        f"delta.`{lake / 'silver' / 'binlog_events'}` WHERE table_name = 't' "
        "ORDER BY binlog_file, start_pos, row_in_event").collect()
    got: dict = {}
    for r in rows:
        after = json.loads(r["row_after"])
        got[after["id"]] = after["v"]
    assert {(k, v) for k, v in got.items()} == want
