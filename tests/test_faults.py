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


@pytest.mark.parametrize("layer,damage", [("bronze", "delete"), ("silver", "truncate")])
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
        st, text = _status_when_full(lake)
        filler.unlink()
        st, text = _status(lake)
        assert "INTERRUPTED bronze run" in text or all(
            f["status"] == "completed" for f in st["files"]), text
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
