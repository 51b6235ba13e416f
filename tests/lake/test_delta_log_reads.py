"""What the stages read from a Delta log after a long history: only the commits they need.

Silver counts what it appended from its commits' metrics (``rows_written_since``) and its
quarantine from the files' row counts (``rows_in_table``), quality and
gold take the files appended since a version (``files_added``). A stream's table gains a commit
every few seconds; a run that read the whole log each time would cost more every day. These
tables are written by the embedded engine (its commits carry ``numOutputRows``) and
checkpointed with delta-rs, as a long-lived table is; then the log is damaged the ways time
damages it: commits cleaned up after a checkpoint, and commits no reader should need.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.lake.delta_ops import rows_in_table, rows_written_since

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


def test_a_create_table_commit_adds_no_rows(spark, tmp_path: Path) -> None:
    """A table declared first (``CREATE TABLE``: what silver does on a catalog lake, and
    delta-spark on JVM Spark), then appended to: its create commit has no metrics and adds
    no rows, so the rows written are still read from the log (not counted by the engine)."""
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE declared_first (id BIGINT) USING delta LOCATION '{path}'").collect()
    for start, n in ((0, 5), (5, 7)):
        spark.range(start, start + n).write.format("delta").mode("append").save(path)
    assert rows_written_since(path, None) == 12
    assert rows_written_since(path, 0) == 12


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


# -- rows_in_table: a table's rows from its log's statistics -------------------------------------

def _rewrite_commit(path: str, version: int, edit) -> None:
    """The commit's actions, each passed through ``edit`` (a dict changed in place)."""
    import json

    f = _commit_file(path, version)
    actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    for a in actions:
        edit(a)
    f.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _strip_stats(action: dict) -> None:
    """An add action without its statistics (a writer that records none)."""
    if "add" in action:
        action["add"].pop("stats", None)


def _allow_deletion_vectors(action: dict) -> None:
    if "protocol" in action:
        action["protocol"] = {"minReaderVersion": 3, "minWriterVersion": 7,
                              "readerFeatures": ["deletionVectors"],
                              "writerFeatures": ["deletionVectors"]}


def test_rows_in_table_sums_the_files_row_counts(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for start, n in ((0, 5), (5, 7), (12, 11)):
        spark.range(start, start + n).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 3 = 0")  # files rewritten, not marked
    want = spark.read.format("delta").load(path).count()
    assert want == 15 and rows_in_table(path) == want
    assert rows_in_table(str(tmp_path / "none")) is None


def test_a_file_without_a_row_count_is_not_guessed(spark, tmp_path: Path) -> None:
    from pipelines.lake.tables import Lake, SILVER_QUARANTINE

    lake = Lake(str(tmp_path / "lake"))
    path = lake.path(SILVER_QUARANTINE)
    rows = [("s", "f.000001", i, 0) for i in range(4)]
    for part in (rows[:3], rows[3:]):
        (spark.createDataFrame(part, "source_id string, binlog_file string, start_pos long, "
                                     "row_in_event int")
         .write.format("delta").mode("append").save(path))
    assert rows_in_table(path) == 4
    _rewrite_commit(path, 1, _strip_stats)
    assert rows_in_table(path) is None
    assert lake.rows(spark, SILVER_QUARANTINE) == 4  # counted by the engine instead


def test_a_table_that_may_hold_deletion_vectors_is_not_counted_from_its_log(
        spark, tmp_path: Path) -> None:
    # A file's count includes the rows its deletion vector marks deleted (delta-spark writes
    # them when the table enables the feature): only the engine's count is right then.
    path = _table(spark, tmp_path, [5, 7])
    _rewrite_commit(path, 0, _allow_deletion_vectors)
    for summary in (*(Path(path) / "_delta_log").glob("*checkpoint*"),
                    *(Path(path) / "_delta_log").glob("*.crc")):  # they repeat the protocol
        summary.unlink()
    (Path(path) / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    assert rows_in_table(path) is None
