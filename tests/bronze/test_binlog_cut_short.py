"""A closed binlog cut short (a copy taken too early, a disk that lost its tail): bronze reads
it up to the last complete event and names that state ``partial`` with the position, the same
words in the run's line, ``status`` and ``repair``; the run exits 1; the whole file indexed
later completes it with every row exactly once (silver replays as from the whole file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.binlog.reader import BinlogFileReader
from pipelines.cli.main import main

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
NAME = "mariadb-bin.000002"
CUT = 30000  # inside the INSERT at 24545 of the transaction from 2584 (mariadb-binlog: # at)

pytestmark = pytest.mark.spark


def _run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out + got.err


def test_a_closed_binlog_cut_short_is_partial_up_to_its_last_event(spark, tmp_path: Path,
                                                                    capsys) -> None:
    whole = (SAMPLES / NAME).read_bytes()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / NAME).write_bytes(whole[:CUT])
    lake = str(tmp_path / "lake")
    code, out = _run(capsys, "--lake", lake, "index", "--binlog-dir", str(tmp_path / "cut"),
                     "--files", NAME)
    words = "partial: indexed up to pos 24545, where the file is cut short"
    assert code == 1 and f"bronze: {NAME}: partial," in out and words in out, out
    assert "the transaction from pos 2584 lacks its end" in out
    code, out = _run(capsys, "--lake", lake, "status")
    assert f"default/{NAME}: partial, events 22, row changes 11, last pos 24545" in out, out
    assert words in out
    code, out = _run(capsys, "--lake", lake, "repair")
    assert code == 0 and f"repair: binlog not wholly indexed (the file, not the lake): " \
        f"default/{NAME}: partial at pos 24545: {words}" in out, out
    assert "repair: no damage to the lake found" in out

    # the whole file, indexed into the same lake and into a fresh one: the same rows
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / NAME).write_bytes(whole)
    for where in (lake, str(tmp_path / "fresh")):
        code, out = _run(capsys, "--lake", where, "index", "--binlog-dir",
                         str(tmp_path / "whole"), "--files", NAME)
        assert code == 0 and f"bronze: {NAME}: completed" in out, out

    def rows(root: str, layer: str) -> list[tuple]:
        df = spark.read.format("delta").load(f"{root}/{layer}/binlog_events")
        if layer == "bronze":
            df = df.where("event_type IN ('INSERT', 'UPDATE', 'DELETE')")
        cols = ["binlog_file", "start_pos", "row_in_event", "event_type"] + (
            ["row_before", "row_after"] if layer == "silver" else [])
        return sorted(tuple(r) for r in df.select(*cols).collect())

    for layer in ("bronze", "silver"):
        again, fresh = rows(lake, layer), rows(str(tmp_path / "fresh"), layer)
        assert again == fresh and len(set(again)) == len(again) > 11


def test_the_reader_raises_unless_asked_to_read_a_cut_file(tmp_path: Path) -> None:
    from pipelines.errors import TruncatedError

    path = tmp_path / NAME
    path.write_bytes((SAMPLES / NAME).read_bytes()[:CUT])
    with pytest.raises(TruncatedError, match="pos 24545"):
        list(BinlogFileReader(str(path)))
    reader = BinlogFileReader(str(path), cut_short=True)
    assert len(list(reader)) == 22 and reader.end_pos == 24545
    assert "file ends inside an event" in reader.truncated
    path.write_bytes((SAMPLES / NAME).read_bytes()[:40])  # inside the FORMAT_DESCRIPTION
    with pytest.raises(TruncatedError):
        list(BinlogFileReader(str(path), cut_short=True))
