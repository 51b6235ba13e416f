"""``stream.reader``: what one event of the dump does to the micro-batch and the position, as
statements (no server, no engine). The dump is a real sample binlog cut into the packets a
server sends for it: a made-up ROTATE naming the file, then its events as in the file; a
reconnect resumes with another made-up ROTATE and a re-sent, made-up FORMAT_DESCRIPTION."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.binlog.reader import BinlogFileReader
from pipelines.bronze.records import BRONZE_SCHEMA, BronzeBatcher, file_batches
from pipelines.binlog.framing import EVENT_HEADER, HEADER_SIZE
from pipelines.source.schema import is_ddl_event
from pipelines.stream.committer import Committer, Identity
from pipelines.stream.gtid import GtidState
from pipelines.stream.position import StreamPosition, Where
from pipelines.stream.protocol import StreamEvent, packet_event
from pipelines.stream.reader import EventReader
from tests.support.bronze_maps import split_maps

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
ARTIFICIAL = 0x20  # LOG_EVENT_ARTIFICIAL_F
ROTATE, HEARTBEAT = 4, 27


def _with_crc(head_and_body: bytes) -> bytes:
    return head_and_body + struct.pack("<I", zlib.crc32(head_and_body))


def _event(type_code: int, body: bytes, *, next_pos: int, flags: int = 0) -> StreamEvent:
    length = HEADER_SIZE + len(body) + 4
    head = EVENT_HEADER.pack(0, type_code, 1, length, next_pos, flags)
    return packet_event(b"\0" + _with_crc(head + body))


def fake_rotate(name: str, pos: int = 4) -> StreamEvent:
    """The ROTATE a server makes up at the start of a dump (log_pos 0, artificial)."""
    return _event(ROTATE, struct.pack("<Q", pos) + name.encode(), next_pos=0, flags=ARTIFICIAL)


def heartbeat(name: str, next_pos: int) -> StreamEvent:
    return _event(HEARTBEAT, name.encode(), next_pos=next_pos)


def file_packets(path: Path) -> list[StreamEvent]:
    """The file's events as dump packets (``0x00`` + the event's bytes)."""
    data, pos, out = path.read_bytes(), 4, []
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos + 9)[0]
        out.append(packet_event(b"\0" + data[pos:pos + length]))
        pos += length
    return out


def made_up(se: StreamEvent) -> StreamEvent:
    """``se`` re-sent as the server re-sends a FORMAT_DESCRIPTION on a resume: log_pos 0,
    artificial, its CRC recomputed."""
    h = se.raw.header
    head = EVENT_HEADER.pack(h.timestamp, h.type_code, h.server_id, h.event_length, 0,
                             h.flags | ARTIFICIAL)
    return packet_event(b"\0" + _with_crc(head + se.raw.body[:-4]))


def _reader(name: str) -> tuple[EventReader, Committer, list[str], list[str]]:
    pos = StreamPosition()
    pos.start(Where(name, 4, GtidState.parse("", mariadb=True)))
    book = Committer(None, None, None, Identity("s", None, 77), batch_rows=100,
                     batch_interval_ms=1000)
    taken_over = []
    reader = EventReader(pos, book, source_id="s", server_uuid=None, batch_rows=7,
                         takeover=taken_over.append)
    reader.server_crc = True  # the samples' server: binlog_checksum=CRC32
    reader.new_batch(name, 0)
    return reader, book, [], taken_over


def _file_mode_rows(path: Path) -> list[dict]:
    reader = BinlogFileReader(str(path))
    batcher = BronzeBatcher(source_id="s", binlog_file=path.name, batch_rows=7)
    return pa.Table.from_batches(list(file_batches(reader, batcher, reader))).to_pylist()


def _rows(batches) -> list[dict]:
    return pa.Table.from_batches(list(batches), schema=BRONZE_SCHEMA).to_pylist()


def _split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    return ([r for r in rows if r["event_type"] != "END"],
            [r for r in rows if r["event_type"] == "END"])


@pytest.mark.parametrize("name", ["mariadb-bin.000001", "mariadb-bin.000003"])
def test_a_dumped_file_gives_file_modes_rows_and_its_end_row(name: str) -> None:
    reader, book, ddl, _ = _reader(name)
    packets = file_packets(SAMPLES / name)
    reader.on_event(fake_rotate(name))
    for se in packets:
        reader.on_event(se)
    got, got_end = _split(_rows(reader.take()))
    want, want_end = _split(_file_mode_rows(SAMPLES / name))
    assert len(got) > 10 and got == want
    assert [r["start_pos"] for r in got_end] == [r["start_pos"] for r in want_end]
    assert '"closed_by": "ROTATE"' in got_end[0]["query"]
    # The real ROTATE ended the file: the committer completes it; reading goes on in the next.
    size = (SAMPLES / name).stat().st_size
    assert book.closed_files == {name: size}
    nxt = f"mariadb-bin.{int(name[-6:]) + 1:06d}"
    assert (reader.pos.here.file, reader.pos.here.pos) == (nxt, 4)
    assert (reader.pos.boundary.file, reader.pos.boundary.pos) == (nxt, 4)
    assert reader.pos.events == len(packets)
    assert reader.pos.row_changes == sum(r["event_type"] in ("INSERT", "UPDATE", "DELETE")
                                         for r in got)
    # 000001 holds the CREATE TABLEs: the last one's end is where a snapshot is owed from.
    ddl_ends = [r["end_pos"] for r in got if r["event_type"] == "QUERY"
                and is_ddl_event("query", r["query"])]
    assert bool(ddl_ends) == (name == "mariadb-bin.000001")
    assert reader.pos.last_ddl == ((name, max(ddl_ends)) if ddl_ends else None)


def test_made_up_events_set_state_only() -> None:
    name = "mariadb-bin.000003"
    reader, _, _, _ = _reader(name)
    fde = file_packets(SAMPLES / name)[0]
    reader.on_event(fake_rotate(name, 4))
    reader.on_event(made_up(fde))
    assert reader.parser.fde is not None, "a made-up FORMAT_DESCRIPTION still sets the format"
    reader.on_event(heartbeat(name, 4))
    assert reader.pos.caught_up
    assert (reader.pos.events, len(reader), reader.pos.here.pos) == (0, 0, 4)


def test_a_file_ended_by_stop_is_closed() -> None:
    name = "mariadb-bin.000005"
    reader, book, _, _ = _reader(name)
    reader.on_event(fake_rotate(name))
    for se in file_packets(SAMPLES / name):
        reader.on_event(se)
    _, end = _split(_rows(reader.take()))
    assert len(end) == 1 and '"closed_by": "STOP"' in end[0]["query"]
    assert book.closed_files == {name: (SAMPLES / name).stat().st_size}


def test_drops_mid_transaction_roll_back_to_the_boundary_and_the_resend_gives_the_same_rows(
        ) -> None:
    """The connection drops inside a transaction again and again; each time the reader goes
    back to the boundary (rows, counters, position) and the server re-sends from there."""
    name = "mariadb-bin.000003"
    packets = file_packets(SAMPLES / name)
    at = {se.raw.header.pos: i for i, se in enumerate(packets)}
    reader, _, _, _ = _reader(name)
    reader.on_event(fake_rotate(name))
    i, drops, dropped_at = 0, 0, set()
    while i < len(packets):
        reader.on_event(packets[i])
        i += 1
        if reader.in_transaction and i % 13 == 0 and i not in dropped_at:
            dropped_at.add(i)
            b = reader.pos.boundary
            marked = len(reader.mb.batches), reader.mb._mark_rows
            reader.rollback()
            drops += 1
            here = reader.pos.here
            assert (here.file, here.pos) == (b.file, b.pos) and not reader.in_transaction
            assert len(reader) == marked[1]
            reader.on_event(fake_rotate(b.file, b.pos))  # the re-sent dump
            if b.pos > 4:
                reader.on_event(made_up(packets[0]))
            i = at[b.pos]
    assert drops > 10
    got, got_maps = split_maps(_split(_rows(reader.take()))[0])
    want, want_maps = split_maps(_split(_file_mode_rows(SAMPLES / name))[0])
    assert got == want
    assert got_maps == want_maps and want_maps
    assert reader.pos.events == len(packets), "a rollback takes back the events it counted"
    assert reader.pos.row_changes == len(want)


def test_a_gtid_start_takes_over_the_first_file_the_dump_names() -> None:
    pos = StreamPosition("gtid")
    pos.start(Where("", 4, GtidState.parse("0-1-5", mariadb=True)))
    book = Committer(None, None, None, Identity("s", None, 77), batch_rows=100,
                     batch_interval_ms=1000)
    taken: list[str] = []
    reader = EventReader(pos, book, source_id="s", server_uuid=None, batch_rows=7,
                         takeover=taken.append, row_changes=lambda _n: 12)
    reader.server_crc = True
    reader.takeover_pending = True
    reader.new_batch("", 0)
    reader.on_event(fake_rotate("mariadb-bin.000004", 4))
    reader.on_event(fake_rotate("mariadb-bin.000004", 4))
    assert taken == ["mariadb-bin.000004"], "taken over once, by the first ROTATE"
    assert book.row_counts["mariadb-bin.000004"] == 12  # a resume counts what bronze holds
    assert reader.mb.binlog_file == "mariadb-bin.000004"
