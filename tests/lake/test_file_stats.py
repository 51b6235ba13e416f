"""``file_stats.alone_in_key_ranges`` over real Delta tables written by the embedded engine:
what the log's per-file min/max statistics can and cannot rule out."""

from __future__ import annotations

import pytest

from pipelines.lake.delta_ops import create_with_stats_columns, current_version, files_added
from pipelines.lake.file_stats import TRUSTED_CHARS, alone_in_key_ranges

DDL = "source_id string, seq bigint, note string"
KEYS = [["source_id", "seq"], ["seq"], ["note"]]


def _table(spark, path: str, *commits: list[tuple]) -> list[str]:
    """Append each commit's rows; the data files of the last one."""
    for rows in commits:
        spark.createDataFrame(rows, DDL).write.format("delta").mode("append").save(path)
    last = current_version(path)
    files = files_added(path, last - 1, last)
    assert files
    return files


@pytest.mark.parametrize("older,window,want", [
    # the window's seq past the history's: nothing older within its ranges
    ([("s", 1, "a"), ("s", 9, "b")], [("s", 20, "c"), ("s", 30, "d")], [True, True, True]),
    # an older seq inside the window's range: it may share a key (it does not, but the
    # statistics cannot tell); the note ranges do not meet
    ([("s", 1, "a"), ("s", 25, "b")], [("s", 20, "c"), ("s", 30, "d")], [False, False, True]),
    # the same seq under another source: outside the source range, so the pair is alone
    ([("t", 25, "c")], [("s", 20, "c"), ("s", 30, "d")], [True, False, False]),
    # a greatest string that may be cut short: not trusted
    ([("s", 1, "a")], [("s", 20, "x" * TRUSTED_CHARS)], [True, True, False]),
])
def test_ranges_of_the_window_files(spark, tmp_path, older, window, want):
    path = str(tmp_path / "t")
    files = _table(spark, path, older, window)
    assert alone_in_key_ranges(path, 1, files, KEYS) == want


def test_what_the_statistics_cannot_tell(spark, tmp_path):
    import pyarrow as pa

    path = str(tmp_path / "t")
    schema = pa.schema([("source_id", pa.string()), ("seq", pa.int64()), ("note", pa.string())])
    create_with_stats_columns(path, schema, [], ["seq"])  # version 0: no statistics on notes
    files = _table(spark, path, [("s", 1, "a")], [("s", 20, "b")])  # versions 1, 2
    assert alone_in_key_ranges(path, 2, files, [["seq"], ["note"], ["source_id", "seq"]]) \
        == [True, False, False]
    # an older version does not list the window's file; a table that is not there
    assert alone_in_key_ranges(path, 1, files, [["seq"]]) == [False]
    assert alone_in_key_ranges(str(tmp_path / "none"), 0, files, [["seq"]]) == [False]
    assert alone_in_key_ranges(path, 2, [], [["seq"]]) == [True]  # no rows: nothing shared
