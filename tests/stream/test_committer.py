"""``stream.committer`` on the embedded engine: a commit is ONE Delta version holding the
micro-batch's rows and the CHECKPOINT at the boundary; nothing to commit writes nothing; a
failed append leaves the committed place where it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.bronze.files import load_states
from pipelines.binlog.reader import BinlogFileReader
from pipelines.lake.delta_ops import current_version
from pipelines.errors import EngineError
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.stream.batch import MicroBatch
from pipelines.stream.checkpoint import gap_batch, load_gaps, load_latest
from pipelines.stream.committer import Committer, Identity
from pipelines.stream.files_state import StreamFiles
from pipelines.stream.gtid import GtidState
from pipelines.stream.position import StreamPosition, Where

pytestmark = pytest.mark.spark

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "binlogs" / "mariadb-bin.000003"


def _committer(spark, root: Path, *, batch_rows: int = 100,
               interval_ms: int = 1000) -> Committer:
    lake = Lake(str(root))
    files = StreamFiles(spark, lake, "s", "stream://h:1")
    return Committer(spark, lake, files,
                     Identity("s", None, 77), batch_rows=batch_rows,
                     batch_interval_ms=interval_ms)


def _sample_rows():
    mb = MicroBatch(source_id="s", server_uuid=None, batch_rows=1000, binlog_file=SAMPLE.name)
    reader = BinlogFileReader(str(SAMPLE))
    for event in reader:
        mb.add(event)
    return mb.take(), reader.end_pos


def _position(file: str, pos: int) -> StreamPosition:
    p = StreamPosition()
    p.start(Where(file, pos, GtidState.parse("0-1-5", mariadb=True)))
    return p


def test_due_by_size_or_age() -> None:
    c = Committer(None, Lake("/nowhere"), None, Identity("s", None, 1), batch_rows=10,
                  batch_interval_ms=500)
    t0 = c.last_commit
    assert c.due(10, False, t0)  # full
    assert not c.due(3, False, t0 + 0.1)  # young
    assert c.due(3, False, t0 + 0.6) and c.due(0, True, t0 + 0.6)  # old, rows or moved
    assert not c.due(0, False, t0 + 60)  # nothing at all to record


def test_a_commit_is_one_version_with_rows_and_checkpoint(spark, tmp_path: Path) -> None:
    c = _committer(spark, tmp_path)
    rows, end = _sample_rows()
    p = _position(SAMPLE.name, end)
    assert c.commit(rows, p) is True
    path = c.lake.path(BRONZE_EVENTS)
    assert current_version(path) == 0  # created by this one commit
    df = spark.read.format("delta").load(path)
    assert df.count() == sum(b.num_rows for b in rows) + 1
    ck = load_latest(spark, c.lake, "s")
    assert (ck.seq, ck.file, ck.pos, ck.gtid, ck.replica_server_id) == (
        1, SAMPLE.name, end, "0-1-5", 77)
    assert not p.moved and p.committed == (SAMPLE.name, end)
    # nothing new: no version
    assert c.commit([], p) is False and current_version(path) == 0
    # the boundary moved without rows (e.g. skipped events): a checkpoint-only commit
    p.here.pos += 100
    p.mark()
    assert c.commit([], p) is True and current_version(path) == 1
    assert load_latest(spark, c.lake, "s").seq == 2


def test_a_gap_and_a_closed_file_ride_on_commits(spark, tmp_path: Path) -> None:
    c = _committer(spark, tmp_path)
    p = _position("bin.000007", 4)
    p.committed_boundary()
    c.pending_gap = gap_batch(source_id="s", server_uuid=None, file="bin.000007", pos=4,
                              detail={"reason": "purged"})
    assert c.commit([], p) is True  # not moved, but a gap is pending
    assert c.pending_gap is None
    assert [g["reason"] for g in load_gaps(spark, c.lake, "s")] == ["purged"]
    # bin.000006's ROTATE was streamed: its END row is in the batch, the file completes
    mb = MicroBatch(source_id="s", server_uuid=None, batch_rows=10, binlog_file="bin.000006")
    mb.close_file(pos=999, timestamp=1_700_000_000, info={"closed": True})
    c.file_opened("bin.000006", 0)
    c.file_closed("bin.000006", 999)
    p.here.pos = 120
    p.mark()
    assert c.commit(mb.take(), p) is True
    states = load_states(spark, c.lake)
    assert states[("s", "bin.000006")].status == "completed"
    assert states[("s", "bin.000006")].last_pos == 999


def test_gtid_mode_before_the_first_file_commits_nothing(spark, tmp_path: Path) -> None:
    c = _committer(spark, tmp_path)
    p = StreamPosition("gtid")
    p.start(Where("", 4, GtidState.parse("0-1-5", mariadb=True)))
    assert c.commit([], p) is False
    assert current_version(c.lake.path(BRONZE_EVENTS)) is None


def test_a_failed_append_moves_nothing(spark, tmp_path: Path) -> None:
    blocker = tmp_path / "bronze"
    blocker.write_text("a file where the bronze directory should be")
    c = _committer(spark, tmp_path)
    rows, end = _sample_rows()
    p = _position(SAMPLE.name, end)
    with pytest.raises(EngineError, match="appending"):
        c.commit(rows, p)
    assert p.moved and p.committed is None and c.commits == 0
