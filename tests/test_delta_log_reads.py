"""What the stages read from a Delta log after a long history: only the commits they need.

Silver counts what it appended from its commits' metrics (``rows_written_since``), quality and
gold take the files appended since a version (``files_added``). A stream's table gains a commit
every few seconds; a run that read the whole log each time would cost more every day. These
tables are written by the embedded engine (its commits carry ``numOutputRows``) and
checkpointed with delta-rs, as a long-lived table is; then the log is damaged the ways time
damages it: commits cleaned up after a checkpoint, and commits no reader should need.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.delta_ops import rows_written_since

pytestmark = pytest.mark.spark


def _commit_file(path: str, version: int) -> Path:
    return Path(path) / "_delta_log" / f"{version:020d}.json"


def _table(spark, tmp_path: Path, sizes: list[int]) -> str:
    """One append per size (version i holds ``sizes[i]`` rows), then a checkpoint."""
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    start = 0
    for n in sizes:
        spark.range(start, start + n).write.format("delta").mode("append").save(path)
        start += n
    DeltaTable(path).create_checkpoint()
    return path


def test_rows_written_since_counts_the_commits_after_the_version(spark, tmp_path: Path) -> None:
    path = _table(spark, tmp_path, [5, 7, 11, 13])
    assert rows_written_since(path, None) == 36
    assert rows_written_since(path, 0) == 31
    assert rows_written_since(path, 2) == 13
    assert rows_written_since(path, 3) == 0


def test_commits_before_the_version_are_not_read(spark, tmp_path: Path) -> None:
    """A run reads the commits after the version it knows, not the history before it: with
    the first commits unreadable (the snapshot loads from the checkpoint), the counts after
    them are still exact. (``files_added`` also loads the snapshot at its first version,
    which needs the log up to it; its history is read the same way.)"""
    path = _table(spark, tmp_path, [5, 7, 11, 13])
    for v in (0, 1):
        _commit_file(path, v).write_text("not a commit\n")
    assert rows_written_since(path, 1) == 24
    assert rows_written_since(path, 2) == 13


def test_a_commit_gone_from_the_range_is_not_guessed(spark, tmp_path: Path) -> None:
    """A commit in the asked range cleaned up from the log: no count (the caller counts the
    table instead), never the sum of the commits that are left."""
    path = _table(spark, tmp_path, [5, 7, 11, 13])
    _commit_file(path, 1).unlink()
    assert rows_written_since(path, 0) is None
    assert rows_written_since(path, 1) == 24
