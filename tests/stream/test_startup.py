"""``stream.startup`` on the embedded engine and a real MariaDB: a first run starts at the
oldest binlog, a restart at the latest CHECKPOINT whatever the flags say, ``--reset`` keeps
the checkpoint sequence, and bronze rows past the checkpoint make the stream take their file
over from its start."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.binlog.reader import BinlogFileReader
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.mysql.dsn import Dsn
from pipelines.stream.batch import MicroBatch
from pipelines.stream.checkpoint import load_latest
from pipelines.stream.committer import Committer, Identity
from pipelines.stream.files_state import StreamFiles
from pipelines.stream.gtid import GtidState
from pipelines.stream.position import StreamPosition, Where
from pipelines.stream.protocol import StartAt
from pipelines.stream.source import SourceServer
from pipelines.stream.startup import Startup

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "binlogs" / "mariadb-bin.000003"


@pytest.fixture
def lake(spark, mariadb, tmp_path: Path):
    src = SourceServer(Dsn.parse(mariadb.dsn())).load()
    lake = Lake(str(tmp_path))
    files = StreamFiles(spark, lake, "s", "stream://h:1")
    committer = Committer(spark, lake, files, Identity("s", None, 9), batch_rows=100,
                          batch_interval_ms=10)
    yield Startup(spark, lake, "s", src, files), committer
    src.close()


def _commit(committer: Committer, file: str, pos: int, rows=()) -> None:
    p = StreamPosition()
    p.start(Where(file, pos, GtidState.parse("0-1-3", mariadb=True)))
    committer.commit(list(rows), p)


def test_a_first_run_starts_at_the_oldest_binlog(lake, mariadb) -> None:
    startup, _ = lake
    pos = StreamPosition()
    want, seq, takeover = startup.plan(None, False, pos)
    oldest = mariadb.binlog_files()[0].name
    assert (want, seq, takeover) == (StartAt(oldest, 4), 0, False)
    assert (pos.here.file, pos.here.pos, pos.committed) == (oldest, 4, None)
    gtid_pos = StreamPosition()
    want, _, takeover = startup.plan(StartAt(gtid="0-1-1"), False, gtid_pos)
    assert want.gtid == "0-1-1" and takeover and gtid_pos.mode == "gtid"


def test_a_restart_resumes_at_the_checkpoint_and_ignores_flags(lake) -> None:
    startup, committer = lake
    _commit(committer, "mariadb-bin.000009", 1234)
    pos = StreamPosition()
    want, seq, _ = startup.plan(StartAt("mariadb-bin.000001", 4), False, pos)
    assert (want, seq) == (StartAt("mariadb-bin.000009", 1234), 1)
    assert pos.committed == ("mariadb-bin.000009", 1234) and not pos.moved
    assert str(pos.here.gtid) == "0-1-3"
    # --reset: the flags win, the sequence goes on from the old checkpoint
    pos = StreamPosition()
    want, seq, _ = startup.plan(StartAt("mariadb-bin.000001", 4), True, pos)
    assert (want, seq, pos.committed) == (StartAt("mariadb-bin.000001", 4), 1, None)


def test_rows_past_the_checkpoint_make_the_stream_take_the_file_over(spark, lake) -> None:
    startup, committer = lake
    mb = MicroBatch(source_id="s", server_uuid=None, batch_rows=1000, binlog_file=SAMPLE.name)
    for event in BinlogFileReader(str(SAMPLE)):
        mb.add(event)
    _commit(committer, SAMPLE.name, 4, mb.take())  # rows beyond a checkpoint at 4
    pos = StreamPosition()
    want, seq, _ = startup.plan(None, False, pos)
    assert want == StartAt(SAMPLE.name, 4) and seq == 1
    assert pos.mode == "position" and pos.committed is None
    left = (committer.lake.read(spark, BRONZE_EVENTS)
            .where("row_in_event >= 0").count())
    assert left == 0  # the file's rows were dropped: the stream writes them again
    # the CHECKPOINT rows of the file go with them (as before the split): a kill -9 before the
    # next commit restarts from the default start, re-streaming (never doubling) older files
    assert load_latest(spark, committer.lake, "s") is None
