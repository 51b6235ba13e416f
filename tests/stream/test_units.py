"""Stream pieces without a server or Spark: packet framing, GTID state, micro-batches cut back
to transaction boundaries, checkpoint rows."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.binlog.reader import BinlogFileReader
from pipelines.bronze.records import BRONZE_SCHEMA, BronzeBatcher, file_batches
from pipelines.errors import SourceError
from pipelines.stream.batch import MicroBatch
from pipelines.stream.checkpoint import CHECKPOINT, Checkpoint, checkpoint_batch, gap_batch
from pipelines.stream.gtid import GtidState
from pipelines.stream.protocol import StartAt, packet_event
from pipelines.binlog.names import binlog_order
from tests.support.bronze_maps import split_maps

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "binlogs" / "mariadb-bin.000003"

# -- packet framing ---------------------------------------------------------------------------

# MariaDB 10.11's fake ROTATE at the start of a dump (captured off the wire):
#   00                    OK marker
#   00000000              timestamp 0 (made up by the server)
#   04                    ROTATE
#   01000000              server_id 1
#   31000000              event_length 49
#   00000000              log_pos 0: at no offset
#   2000                  flags LOG_EVENT_ARTIFICIAL_F
#   0400000000000000      position 4
#   6d6172696164622d62696e2e303030303031   "mariadb-bin.000001"
#   523c7354              CRC32
FAKE_ROTATE = bytes.fromhex(
    "00" "00000000" "04" "01000000" "31000000" "00000000" "2000"
    "0400000000000000" "6d6172696164622d62696e2e303030303031" "523c7354")

# An XID event ending at 845 (log_pos), 31 bytes long: it starts at 845 - 31 = 814.
XID = bytes.fromhex(
    "00" "5a3c7354" "10" "01000000" "1f000000" "4d030000" "0000"
    "0300000000000000" "11223344")


def test_fake_rotate_is_artificial_and_at_no_offset() -> None:
    e = packet_event(FAKE_ROTATE)
    assert e.artificial
    assert e.raw.header.type_code == 4 and e.raw.header.pos == 0
    assert e.raw.body[8:-4] == b"mariadb-bin.000001"


def test_event_start_is_log_pos_minus_length() -> None:
    e = packet_event(XID)
    assert not e.artificial
    assert (e.raw.header.pos, e.raw.header.next_pos, e.raw.header.event_length) == (814, 845, 31)


@pytest.mark.parametrize("data", [b"", b"\xfe\x00\x00\x02\x00", XID[:-1], b"\xff" + XID[1:]])
def test_packets_that_are_not_one_event_are_refused(data: bytes) -> None:
    with pytest.raises(SourceError):
        packet_event(data)


def test_start_at_modes() -> None:
    assert StartAt("f.000001", 4).mode == "position"
    assert StartAt(gtid="0-1-5").mode == "gtid"
    assert str(StartAt("f.000002", 120)) == "f.000002:120"


def test_binlog_orders_sort_numerically() -> None:
    names = ["b.000010", "b.000009", "b.1000000"]
    assert sorted(names, key=binlog_order) == ["b.000009", "b.000010", "b.1000000"]


# -- GTID state -------------------------------------------------------------------------------

def test_mariadb_gtid_position_per_domain() -> None:
    st = GtidState.parse("0-1-10,2-5-7", mariadb=True)
    st.add("0-1-11")
    st.add("1-1-3")
    assert str(st) == "0-1-11,1-1-3,2-5-7"
    oldest = GtidState.parse("0-1-20,1-1-2", mariadb=True)
    assert st.behind(oldest) == ["0-1-11"]  # domain 0 continues past 11 only from 20 on


def test_mysql_gtid_set_intervals_merge_and_contain() -> None:
    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    st = GtidState.parse(f"{u}:1-5:7", mariadb=False)
    st.add(f"{u}:6")
    st.add(f"{u.upper()}:tag:3")
    assert str(st) == f"{u}:1-7,{u}:tag:3"
    assert GtidState.parse(f"{u}:2-4", mariadb=False).issubset(st)
    assert not GtidState.parse(f"{u}:1-8", mariadb=False).issubset(st)


# -- micro-batches ----------------------------------------------------------------------------

def _file_rows() -> pa.Table:
    reader = BinlogFileReader(str(SAMPLE))
    batcher = BronzeBatcher(source_id="s", binlog_file=SAMPLE.name, batch_rows=7)
    table = pa.Table.from_batches(list(file_batches(reader, batcher, reader)))
    return table.filter(pa.compute.not_equal(table.column("event_type"), "END"))


def test_micro_batches_cut_back_and_resent_equal_file_mode_rows() -> None:
    """Feed the sample file as a stream that drops mid-transaction every few events: each drop
    cuts the batch back to the last boundary and the server re-sends from there."""
    events = list(BinlogFileReader(str(SAMPLE)))
    mb = MicroBatch(source_id="s", server_uuid=None, batch_rows=7, binlog_file=SAMPLE.name)
    taken: list[pa.RecordBatch] = []
    boundary, i, drops, seen_mid = 0, 0, 0, set()
    while i < len(events):
        mb.add(events[i])
        i += 1
        if not mb.in_transaction:
            mb.mark()
            boundary = i
            if i % 40 == 0:
                taken += mb.take()
        elif i % 17 == 0 and i not in seen_mid:  # the connection drops mid-transaction
            seen_mid.add(i)
            mb.rollback()
            i = boundary
            drops += 1
    taken += mb.take()
    assert drops > 10
    got, got_maps = split_maps(pa.Table.from_batches(taken, schema=BRONZE_SCHEMA).to_pylist())
    want, want_maps = split_maps(_file_rows().to_pylist())
    assert len(got) == len(want) > 100
    assert got == want
    assert got_maps == want_maps and want_maps


def test_take_only_returns_complete_transactions_after_rollback() -> None:
    events = list(BinlogFileReader(str(SAMPLE)))
    mb = MicroBatch(source_id="s", server_uuid=None, batch_rows=3, binlog_file=SAMPLE.name)
    for e in events:
        mb.add(e)
        if not mb.in_transaction:
            mb.mark()
        elif len(mb) > 20:
            break  # inside a transaction with rows spilled to Arrow batches
    complete = mb._mark_rows
    mb.rollback()
    assert len(mb) == complete
    assert not mb.in_transaction


# -- checkpoint rows --------------------------------------------------------------------------

def test_checkpoint_row_carries_its_json_and_a_key_no_change_has() -> None:
    ck = Checkpoint(seq=3, mode="position", file="mariadb-bin.000004", pos=2328, gtid="0-1-49",
                    last_gtid="0-1-49", events=585, row_changes=347)
    batch = checkpoint_batch(ck, source_id="src", server_uuid=None)
    assert batch.schema == BRONZE_SCHEMA
    row = batch.to_pylist()[0]
    assert (row["event_type"], row["binlog_file"], row["start_pos"], row["row_in_event"]) == (
        CHECKPOINT, "mariadb-bin.000004", 2328, -1)
    assert Checkpoint.from_json(row["query"]) == ck
    gap = gap_batch(source_id="src", server_uuid=None, file="f.000009", pos=4,
                    detail={"reason": "purged"}).to_pylist()[0]
    assert gap["event_type"] == "INCIDENT" and gap["row_in_event"] == -2
    assert json.loads(gap["query"])["incident"] == "stream_gap"


def test_checkpoint_json_ignores_unknown_keys() -> None:
    text = json.dumps({"seq": 1, "mode": "gtid", "file": "f.000001", "pos": 4, "future": 1})
    assert Checkpoint.from_json(text).mode == "gtid"


# -- reconnect backoff and liveness -----------------------------------------------------------

def test_backoff_doubles_to_its_ceiling_resets_on_an_event_and_gives_up_when_told() -> None:
    from pipelines.stream.backoff import Backoff

    b = Backoff(attempts=0, max_seconds=5)
    assert [b.failed(OSError("lost")) for _ in range(5)] == [1, 2, 4, 5, 5]
    b.ok()
    assert b.failed(OSError("lost")) == 1
    limited = Backoff(attempts=2, max_seconds=60)
    limited.failed(OSError("x"))
    limited.failed(OSError("x"))
    with pytest.raises(SourceError, match="lost again .gave up after 2 reconnects"):
        limited.failed(OSError("lost again"))


def test_liveness_writes_the_live_file_without_the_dsn(tmp_path: Path) -> None:
    from pipelines.stream.committer import Committer, Identity
    from pipelines.stream.position import StreamPosition, Where
    from pipelines.stream.progress import Liveness, live_path, read_live

    pos = StreamPosition()
    pos.start(Where("bin.000002", 120, GtidState.parse("0-1-9", mariadb=True)))
    pos.event(200, 1_700_000_000)
    pos.rows(3)
    committer = Committer(None, None, None, Identity("s", None, 7), batch_rows=1,
                          batch_interval_ms=1)
    path = live_path(str(tmp_path), "s")
    live = Liveness(path, source_id="s", server="db:3306", pos=pos, committer=committer)
    live.write("reconnecting", error="lost")
    doc = read_live(path)
    assert (doc["state"], doc["file"], doc["pos"], doc["gtid"], doc["row_changes"],
            doc["error"], doc["server"]) == ("reconnecting", "bin.000002", 200, "0-1-9", 3,
                                             "lost", "db:3306")
    assert "stream s bin.000002:200 gtid 0-1-9" in live.status_line()


def test_a_bounded_catch_up_is_cut_by_its_bound_or_a_second_signal() -> None:
    import os
    import signal

    from pipelines.stream.stopping import CutShort, bounded

    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(CutShort, match="its bound passed"):
        with bounded(0.3):
            time.sleep(5)
    assert 0.25 < time.monotonic() - started < 2
    with pytest.raises(CutShort, match="SIGTERM again"):
        with bounded(30):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    with bounded(30):
        pass  # within the bound: nothing raised, no alarm left behind
    time.sleep(0.05)
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_off_a_terminal_the_progress_line_comes_every_interval_on_its_grid(monkeypatch) -> None:
    import io

    from pipelines.stream import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()  # no terminal
    line = progress.ProgressLine(out, interval=10)
    for t in (100.0, 105.0, 110.4, 119.0, 120.9, 125.0, 131.0, 175.0):
        clock[0] = t
        line.show(f"at {t}", force=True)
    shown = [s.split(" ", 1)[1] for s in out.getvalue().splitlines()]
    # 110.4 is on time for 110, 120.9 for 120 (not pushed to 130.4); after a long pause the
    # grid starts again
    assert shown == ["at 100.0", "at 110.4", "at 120.9", "at 131.0", "at 175.0"]
    assert "\r" not in out.getvalue()
    quiet = io.StringIO()
    progress.ProgressLine(quiet, interval=0).show("x", force=True)
    assert quiet.getvalue() == ""  # log_interval = 0: none


def test_metrics_render_prometheus_text_with_escaped_labels() -> None:
    from pipelines.stream.metrics import render

    text = render({"source": "shop", "lags": {"bronze": 0.0, "silver": 1.25},
                   "row_changes": 51, "rows_per_second": 3.5, "events_per_second": 10.0,
                   "commits": 4, "reconnects": 2, "state": "reconnecting",
                   "error": (1_700_000_000.5, "gold", 'can\'t "connect"\nat all')})
    lines = text.splitlines()
    assert 'binlake_stream_lag_seconds{source="shop",stage="silver"} 1.250' in lines
    assert 'binlake_stream_reconnects_total{source="shop"} 2' in lines
    assert 'binlake_stream_running{source="shop"} 0' in lines
    assert ('binlake_stream_last_error_info{source="shop",stage="gold",'
            'message="can\'t \\"connect\\"\\nat all"} 1') in lines
    assert "# TYPE binlake_stream_row_changes_total counter" in lines
    # every sample line is `name{labels} number`, every family announced once
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert all(re.fullmatch(r'binlake_stream_\w+\{.*\} -?[\d.]+', ln) for ln in samples)
    assert len({ln.split()[2] for ln in lines if ln.startswith("# TYPE")}) == 9


def test_status_shows_each_following_stages_lag() -> None:
    from pipelines.stream.status import render_stream_status

    lines = render_stream_status({"source_id": "s", "state": "running", "mode": "gtid",
                                  "stage_lag_seconds": {"bronze": 0.2, "silver": 1.26,
                                                        "gold": 31.0},
                                  "stage_positions": {"bronze": "b.000002:900",
                                                      "silver": "b.000002:400", "gold": None},
                                  "last_checkpoint": {"seq": 3, "file": "b.000002",
                                                      "pos": 900, "at": "t"}})
    assert "  bronze: 0.2s behind the source, at b.000002:900" in lines
    assert "  silver: 1.3s behind the source, at b.000002:400" in lines
    assert "  gold: 31.0s behind the source, at no follow yet in this run" in lines
    assert not any("behind the source" in ln for ln in render_stream_status(
        {"source_id": "s", "state": "stopped", "mode": "gtid"}))


def test_the_freshness_settings_and_their_refusals(tmp_path: Path) -> None:
    from pipelines.config import load_config
    from pipelines.errors import ConfigError
    from pipelines.stream.follower import tick_seconds

    cfg = load_config(env={"BINLAKE_STREAM_FRESHNESS_SECONDS": "1.5",
                           "BINLAKE_STREAM_LOG_INTERVAL": "0"})
    assert (cfg.stream.freshness_seconds, cfg.stream.log_interval, cfg.stream.stop_seconds) \
        == (1.5, 0, 60)
    assert tick_seconds(cfg) == 0.75  # the heartbeat asked for: at most half the bound
    assert tick_seconds(load_config(env={})) == 1.0
    for key, value, words in (("freshness_seconds", 0, "more than 0"),
                              ("stop_seconds", -1, "0 or more"),
                              ("log_interval", -5, "0 or more")):
        with pytest.raises(ConfigError, match=f"stream.{key}: must be {words}"):
            load_config(env={}, overrides={f"stream.{key}": value})
