"""Table-driven hex tests for framing, FORMAT_DESCRIPTION, GTID, QUERY, TABLE_MAP, ROWS, XID.

The bytes are real: MySQL 5.7.21 (CRC32) events from the corpus file
``osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32``
(positions 4–517). ``mariadb-binlog -vv`` on that file shows the same values (checked by
``test_corpus.py``); the expected values below are what that tool prints.
"""

from __future__ import annotations

import io

import pytest

from pipelines.binlog import events as ev
from pipelines.binlog.framing import EVENT_HEADER, HEADER_SIZE, MAGIC, iter_raw_events
from pipelines.binlog.parser import BinlogParser, ChecksumPolicy
from pipelines.binlog.table_map import TableMap
from pipelines.errors import (ChecksumError, DecodeError, MissingTableMapError, NotABinlogError,
                              TruncatedError)

FDE = bytes.fromhex(
    "9e18ec5a"  # timestamp 2018-05-04 08:23:58
    "0f"  # FORMAT_DESCRIPTION
    "01000000"  # server_id 1
    "77000000"  # event_length 119
    "7b000000"  # next_pos 123
    "0000"  # flags
    "0400"  # binlog version 4
    + "352e372e32312d6c6f67".ljust(100, "0")  # "5.7.21-log", NUL-padded to 50 bytes
    + "9e18ec5a"  # create timestamp
    "13"  # header length 19
    "380d0008001200040404041200005f00041a08000000080808020000000a0a0a2a2a001234"
    "00"  # post-header lengths (38 types)
    "01"  # checksum alg: CRC32
    "a7dabdaa"  # CRC32 of the event
)
PREVIOUS_GTIDS = bytes.fromhex("9e18ec5a23010000001f0000009a000000800000000000000000" "00e6b58112")
ANONYMOUS_GTID = bytes.fromhex(
    "7f1aec5a220100000041000000db0000000000"  # header (pos 154)
    "00"  # flags
    "00000000000000000000000000000000"  # no source uuid
    "0000000000000000"  # gno 0
    "02" "0000000000000000" "0100000000000000"  # logical clock: last_committed 0, seq 1
    "2cdfeb9d")
BEGIN = bytes.fromhex(
    "7f1aec5a" "02" "01000000" "59000000" "34010000" "0800"  # header: QUERY at 219, 89 bytes
    "12000000" "00000000" "0d" "0000" "2200"  # thread 18, exec 0, db_len 13, error 0, 34 B vars
    "0000000000012000a05500000000060373746404210021000800050653595354454d"  # status vars
    "73696d755f66696c655f64657600"  # "simu_file_dev" NUL
    "424547494e"  # "BEGIN"
    "e7af7983")
TABLE_MAP = bytes.fromhex(
    "7f1aec5a" "13" "01000000" "4c000000" "80010000" "0000"  # header: TABLE_MAP at 308
    "d70000000000" "0100"  # table_id 215, flags 1
    "0d" "73696d755f66696c655f646576" "00"  # schema simu_file_dev
    "06" "666f6c646572" "00"  # table folder
    "0c"  # 12 columns:
    "03" "0f" "0f" "08" "11" "08" "08" "01" "01" "11" "08" "08"  # LONG VARCHAR VARCHAR LONGLONG
    # TIMESTAMP2 LONGLONG LONGLONG TINY TINY TIMESTAMP2 LONGLONG LONGLONG
    "06" "fd02" "fd02" "00" "00"  # 6 metadata bytes: VARCHAR(765) x2, TIMESTAMP2 fsp 0 x2
    "0002"  # NULL-able bitmap: column 10 (0-based 9) nullable
    "8ce6e8f9")
WRITE_ROWS = bytes.fromhex(
    "7f1aec5a" "1e" "01000000" "66000000" "e6010000" "0000"  # header: WRITE_ROWS v2 at 384
    "d70000000000" "0100" "0200"  # table_id 215, flags STMT_END, extra data length 2
    "0c" "ffff"  # 12 columns, all present (unused bits set too)
    "00f0"  # NULL bitmap: none NULL (unused bits set)
    "51afbb00"  # 12300113
    "0500" "7465737432"  # 'test2' (2-byte length: VARCHAR max 765 > 255)
    "0100" "2f"  # '/'
    "87c5010000000000"  # 116103
    "5aec1a7f"  # TIMESTAMP2 1525422719 = 2018-05-04 08:31:59 UTC
    "cfd50d0000000000"  # 906703
    "0000000000000000" "00" "00"  # 0, 0, 0
    "5aec1a7f"  # 2018-05-04 08:31:59
    "0000000000000000" "4928ba0000000000"  # 0, 12200009
    "e2c675a4")
XID = bytes.fromhex("7f1aec5a10010000001f000000050200000000" "f403000000000000" "ea208ce3")


def parse_all(*events: bytes, checksum=ChecksumPolicy.RAISE) -> list:
    parser = BinlogParser(file="t.000001", checksum=checksum)
    stream = io.BytesIO(MAGIC + b"".join(events))
    return [parser.parse(raw) for raw in iter_raw_events(stream, file="t.000001")]


def test_format_description_fields() -> None:
    (fde,) = parse_all(FDE)
    assert isinstance(fde, ev.FormatDescription)
    assert (fde.binlog_version, fde.server_version, fde.header_length) == (4, "5.7.21-log", 19)
    assert fde.has_crc32 and fde.checksum_alg == 1
    assert fde.post_header_len(ev.EventType.QUERY) == 13
    assert fde.post_header_len(ev.EventType.TABLE_MAP) == 8
    assert fde.post_header_len(ev.EventType.WRITE_ROWS) == 10


@pytest.mark.parametrize("raw, check", [
    (PREVIOUS_GTIDS, lambda e: isinstance(e, ev.PreviousGtids) and e.gtid_set == ""),
    (ANONYMOUS_GTID, lambda e: isinstance(e, ev.Gtid) and e.gtid is None),
    (BEGIN, lambda e: isinstance(e, ev.Query) and (e.thread_id, e.schema, e.query)
     == (18, "simu_file_dev", b"BEGIN")),
    (XID, lambda e: isinstance(e, ev.Xid) and e.xid == 1012),
])
def test_simple_events(raw: bytes, check) -> None:
    event = parse_all(FDE, raw)[-1]
    assert check(event), event


def test_table_map_and_write_rows() -> None:
    _, tm, rows = parse_all(FDE, TABLE_MAP, WRITE_ROWS)
    assert isinstance(tm, TableMap)
    assert (tm.table_id, tm.schema, tm.table, tm.column_count) == (215, "simu_file_dev", "folder", 12)
    assert tm.column_types == [3, 15, 15, 8, 17, 8, 8, 1, 1, 17, 8, 8]
    assert tm.column_meta[1:3] == [765, 765] and tm.column_meta[4] == 0
    assert tm.nullable == [False] * 9 + [True, False, False]
    assert tm.column_names is None  # binlog_row_metadata=MINIMAL (5.7)
    assert isinstance(rows, ev.RowsEvent) and rows.kind == "INSERT" and rows.table is tm
    assert rows.rows == [(None, [
        b"12300113", b"test2", b"/", b"116103", b"2018-05-04 08:31:59", b"906703", b"0", b"0",
        b"0", b"2018-05-04 08:31:59", b"0", b"12200009"])]
    assert rows.present_after is None  # FULL image


def test_crc_mismatch_names_file_and_position() -> None:
    bad = bytearray(XID)
    bad[20] ^= 0xFF  # flip a bit of the xid
    with pytest.raises(ChecksumError) as info:
        parse_all(FDE, bytes(bad))
    assert info.value.file == "t.000001" and info.value.pos == 4 + len(FDE)
    assert "t.000001, pos 123" in str(info.value)
    # The same bytes decode when checksums are ignored on purpose.
    assert parse_all(FDE, bytes(bad), checksum=ChecksumPolicy.IGNORE)[-1].xid != 1012


def test_rows_without_table_map() -> None:
    with pytest.raises(MissingTableMapError) as info:
        parse_all(FDE, WRITE_ROWS)
    assert "table_id 215" in str(info.value) and info.value.pos == 4 + len(FDE)


def test_not_a_binlog_and_truncation() -> None:
    with pytest.raises(NotABinlogError):
        list(iter_raw_events(io.BytesIO(b"PK\x03\x04 not a binlog"), file="x.zip"))
    with pytest.raises(TruncatedError) as info:
        list(iter_raw_events(io.BytesIO(MAGIC + FDE + XID[:25]), file="t.000001"))
    assert info.value.pos == 4 + len(FDE)
    # A file still being written may end inside an event: not an error when allowed.
    assert len(list(iter_raw_events(io.BytesIO(MAGIC + FDE + XID[:25]),
                                    allow_partial_tail=True))) == 1


def test_truncated_row_value_is_an_error_with_position() -> None:
    # Shorten the rows event by 8 bytes (and fix its length) so the last value runs out.
    short = bytearray(WRITE_ROWS[:-12] + WRITE_ROWS[-4:])
    short[9:13] = len(short).to_bytes(4, "little")
    with pytest.raises(TruncatedError) as info:
        parse_all(FDE, TABLE_MAP, bytes(short), checksum=ChecksumPolicy.IGNORE)
    assert "simu_file_dev.folder" in str(info.value)


def test_unknown_event_is_skipped_by_length() -> None:
    # Aurora's padding event (type 100) as found in the corpus: kept raw, never a crash.
    odd = bytearray(XID)
    odd[4] = 100
    (_, unknown) = parse_all(FDE, bytes(odd), checksum=ChecksumPolicy.IGNORE)
    assert isinstance(unknown, ev.Unknown) and unknown.header.type_code == 100


# --- events added for the corpus (issue 6) -------------------------------------------------

import struct as _struct  # noqa: E402
import zlib as _zlib  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pipelines.binlog.json_diff import (INSERT, REMOVE, REPLACE, JsonDiffError,  # noqa: E402
                                        apply_json_diff, read_json_diff)
from pipelines.binlog.reader import BinlogFileReader  # noqa: E402


def event(code: int, body: bytes, *, pos: int = 0, ts: int = 0x5AEC1A7F) -> bytes:
    """A v4 event with a zero CRC trailer (parse with ChecksumPolicy.IGNORE)."""
    length = 19 + len(body) + 4
    return _struct.pack("<IBIIIH", ts, code, 1, length, pos + length, 0) + body + b"\0" * 4


def with_crc(raw: bytes) -> bytes:
    return raw[:-4] + _struct.pack("<I", _zlib.crc32(raw[:-4]))


def maria_block(data: bytes) -> bytes:
    """MariaDB compressed block: 0x80 | size-of-length, big-endian length, zlib stream."""
    return bytes([0x80 | 2]) + len(data).to_bytes(2, "big") + _zlib.compress(data)


def test_maria_query_compressed() -> None:
    body = bytes.fromhex("12000000" "00000000" "04" "0000" "0000") + b"test\0"
    body += maria_block(b"INSERT INTO t VALUES (1)")
    (_, q) = parse_all(FDE, event(165, body), checksum=ChecksumPolicy.IGNORE)
    assert isinstance(q, ev.Query) and (q.schema, q.query) == ("test", b"INSERT INTO t VALUES (1)")


def test_maria_rows_compressed_v1_and_v2() -> None:
    rows_plain = WRITE_ROWS[19 + 6 + 2 + 2 + 3:-4]  # NULL bitmap + values of the one row
    head_v1 = bytes.fromhex("d70000000000" "0100" "0c" "ffff")
    head_v2 = bytes.fromhex("d70000000000" "0100" "0200" "0c" "ffff")
    for code, head in ((166, head_v1), (169, head_v2)):
        _, _, rows = parse_all(FDE, TABLE_MAP, event(code, head + maria_block(rows_plain)),
                               checksum=ChecksumPolicy.IGNORE)
        assert rows.kind == "INSERT" and rows.rows[0][1][:2] == [b"12300113", b"test2"]
    bad = head_v1 + b"\x82\x00\x10not zlib"
    with pytest.raises(DecodeError, match="does not inflate"):
        parse_all(FDE, TABLE_MAP, event(166, bad), checksum=ChecksumPolicy.IGNORE)


def test_binlog_v1_v3_refused() -> None:
    v3 = bytearray(FDE)
    v3[19:21] = b"\x03\x00"
    with pytest.raises(NotABinlogError, match="binlog version 3"):
        parse_all(bytes(v3), checksum=ChecksumPolicy.IGNORE)
    start_v3 = event(1, b"\x01\x00" + b"3.23.58-log".ljust(50, b"\0") + b"\0" * 4)
    with pytest.raises(NotABinlogError, match="1/3"):
        parse_all(start_v3, checksum=ChecksumPolicy.IGNORE)


# MySQL 9.6 GTID_TAGGED (42) from the corpus (binlog_transaction_with_GTID_TAG.000001 at 245):
# version 2, size 60, last non-ignorable field 0, then fields: flags 0, sid (16 varlen
# bytes), gno 3 (zigzag 6), tag "mytag" (length 5 as 0x0a), then clocks and versions.
GTID_TAGGED_BODY = bytes.fromhex(
    "027800" "0000" "02aaee25020804650222c503c502e1029cc103110355" "02dead"
    "0304" "0c" "06" "0a6d79746167" "08000a040c7f1cf3b814244a0610a10412430f0b7872ad08")


def test_gtid_tagged_and_varlen() -> None:
    assert ev.read_varlen_uint(b"\x0a", 0) == (5, 1)
    assert ev.read_varlen_uint(b"\x25\x02", 0) == (0x89, 2)
    assert ev.read_varlen_uint(b"\xff" + (2**64 - 1).to_bytes(8, "little"), 0) == (2**64 - 1, 9)
    with pytest.raises(TruncatedError):
        ev.read_varlen_uint(b"\x03\x00", 0)
    (_, g) = parse_all(FDE, event(42, GTID_TAGGED_BODY[:-4]), checksum=ChecksumPolicy.IGNORE)
    assert g.gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"


def test_transaction_payload_uncompressed_with_row_base(tmp_path) -> None:
    """Compression NONE (255): inner events without CRC; rows numbered on across events."""
    inner_rows = WRITE_ROWS[:-4]
    inner = TABLE_MAP[:-4] + inner_rows + inner_rows + XID[:-4]
    fix = bytearray(inner)
    p = 0
    while p < len(fix):  # inner lengths without the 4-byte trailer
        n = _struct.unpack_from("<I", fix, p + 9)[0] - 4
        _struct.pack_into("<I", fix, p + 9, n)
        p += n
    fields = bytes([2, 3, 252, 255, 0]) + bytes([3, 3, 252]) + _struct.pack("<H", len(fix))
    fields += bytes([1, 3, 252]) + _struct.pack("<H", len(fix)) + b"\0"
    payload = with_crc(event(40, fields + bytes(fix), pos=4 + len(FDE)))
    path = tmp_path / "p.000001"
    path.write_bytes(MAGIC + FDE + payload)
    got = list(BinlogFileReader(str(path)))
    rows = [e for e in got if isinstance(e, ev.RowsEvent)]
    assert [type(e).__name__ for e in got] == [
        "FormatDescription", "TransactionPayload", "TableMap", "RowsEvent", "RowsEvent", "Xid"]
    assert [(r.header.pos, r.header.event_length, r.row_base) for r in rows] == [
        (123, len(payload), 0), (123, len(payload), 1)]
    assert rows[1].rows[0][1][0] == b"12300113"


def _json_obj_age(n: int) -> bytes:
    """Binary JSON {"age": n} (small object, int16 inlined)."""
    return bytes.fromhex("00" "0100" "0e00" "0b00" "0300" "05") + _struct.pack("<h", n) + b"age"


def test_json_diff_read_and_apply() -> None:
    def diff(op, path, value=None):
        out = bytes([op, len(path)]) + path.encode()
        return out + (bytes([len(value)]) + value if value is not None else b"")
    ops = (diff(REPLACE, "$.age", b"\x05\x1a\x00") + diff(INSERT, "$.b", b"\x0c\x01x")
           + diff(INSERT, '$."a b"[0]', b"\x04\x01"))
    with pytest.raises(JsonDiffError):  # no member "a b" to insert into
        apply_json_diff(b'{"age": 24}', read_json_diff(_struct.pack("<I", len(ops)) + ops, 0)[0])
    ops = diff(REPLACE, "$.age", b"\x05\x1a\x00") + diff(INSERT, "$.b", b"\x0c\x01x")
    diffs, end = read_json_diff(_struct.pack("<I", len(ops)) + ops, 0)
    assert end == 4 + len(ops)
    assert diffs == [(REPLACE, "$.age", "26"), (INSERT, "$.b", '"x"')]
    assert apply_json_diff(b'{"age": 24, "list": [1, 2.50]}', diffs) == (
        b'{"b": "x", "age": 26, "list": [1, 2.50]}')
    assert apply_json_diff(b"[1, [2, 3]]", [(REMOVE, "$[1][0]", None),
                                            (INSERT, "$[9]", "true")]) == b"[1, [3], true]"


def test_partial_update_rows_applies_diffs_to_a_full_before_image() -> None:
    # TABLE_MAP of mysql.t (id INT, data JSON, name VARCHAR(100), age INT) from
    # json.binlog.000001, and a PARTIAL_UPDATE_ROWS with a FULL before image.
    tmap = bytes.fromhex("770000000000" "0100" "056d7973716c00" "017400" "04" "03f50f03"
                         "03" "04" "9001" "0e")
    diff = bytes([REPLACE, 5]) + b"$.age" + b"\x03\x05\x1a\x00"
    doc = _json_obj_age(24)
    before = b"\x00" + b"\x01\x00\x00\x00" + _struct.pack("<I", len(doc)) + doc + b"\x03\x00Joe" \
        + b"\x18\x00\x00\x00"
    after = b"\x01" + b"\x01" + b"\x00" + b"\x01\x00\x00\x00" + _struct.pack("<I", len(diff)) \
        + diff + b"\x03\x00Joe" + b"\x1a\x00\x00\x00"
    body = bytes.fromhex("770000000000" "0100" "0200" "04" "0f" "0f") + before + after
    _, tm, rows = parse_all(FDE, event(19, tmap), event(39, body), checksum=ChecksumPolicy.IGNORE)
    assert rows.kind == "UPDATE" and rows.partial_json_flags == [()]
    assert rows.rows == [([b"1", b'{"age": 24}', b"Joe", b"24"],
                          [b"1", b'{"age": 26}', b"Joe", b"26"])]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.binary(max_size=300),
                          st.sampled_from(["INSERT", "DELETE"])), min_size=1, max_size=12),
       st.booleans())
def test_random_valid_event_streams_decode(tmp_path_factory, rows, crc) -> None:
    """Random rows of (INT, VARCHAR(300)) as TABLE_MAP + WRITE/DELETE_ROWS v2 + XID events."""
    fde = bytearray(FDE)
    if not crc:
        fde[-5] = 0
    fde = with_crc(bytes(fde))
    tmap = bytes.fromhex("2a0000000000" "0100" "017300" "017400" "02" "030f" "02" "2c01" "02")
    out = bytearray(MAGIC + fde)

    def add(code: int, body: bytes) -> None:
        raw = bytearray(event(code, body, pos=len(out)))
        if not crc:
            raw = raw[:-4]
            _struct.pack_into("<I", raw, 9, len(raw))
            _struct.pack_into("<I", raw, 13, len(out) + len(raw))
        out.extend(with_crc(bytes(raw)) if crc else raw)

    for value, text, kind in rows:
        add(19, tmap)
        image = b"\x00" + _struct.pack("<i", value) + _struct.pack("<H", len(text)) + text
        add(30 if kind == "INSERT" else 32, bytes.fromhex("2a0000000000" "0100" "0200" "02" "03")
            + image)
        add(16, b"\x01" * 8)
    path = tmp_path_factory.mktemp("stream") / "r.000001"
    path.write_bytes(bytes(out))
    got = [e for e in BinlogFileReader(str(path)) if isinstance(e, ev.RowsEvent)]
    assert [(e.kind, e.rows[0][0] or e.rows[0][1]) for e in got] == [
        (k, [str(v).encode(), t]) for v, t, k in rows]


# A MariaDB 10.11 TABLE_MAP (binlog_row_metadata=FULL) of
# ``CREATE TABLE d.t (b INT UNSIGNED, y YEAR, d INT)``, header and CRC32 left out.
MARIA_YEAR_TABLE_MAP = bytes.fromhex(
    "160000000000" "0100"  # table_id 22, flags 1
    "01" "64" "00" "01" "74" "00"  # schema d, table t
    "03" "03" "0d" "03"  # 3 columns: LONG YEAR LONG
    "00"  # no type metadata
    "07"  # all three nullable
    "01" "01" "c0"  # SIGNEDNESS, 1 byte: bits 1 1 0 (b unsigned, y: the server's YEAR bit, d)
    "04" "06" "016201790164")  # COLUMN_NAME: b, y, d


@pytest.mark.parametrize("mariadb, unsigned", [
    (True, [True, False, False]),  # the server's reading: d INT is signed
    (False, [True, False, True]),  # without YEAR's bit, d took y's (mariadb-binlog's reading)
])
def test_mariadb_counts_year_in_the_signedness_bits(mariadb, unsigned) -> None:
    from pipelines.binlog.table_map import decode_table_map

    tm = decode_table_map(None, MARIA_YEAR_TABLE_MAP, 8, mariadb)
    assert tm.column_names == ["b", "y", "d"]
    assert tm.unsigned == unsigned


def test_one_event_header_struct() -> None:
    from pipelines.binlog import payload
    from pipelines.stream import protocol

    assert payload.EVENT_HEADER is protocol.EVENT_HEADER is EVENT_HEADER  # one struct, files and wire
    assert HEADER_SIZE == 19
    # a ROTATE header: ts 0, type 4, server 1, length 44, next_pos 0, flags 0x20 (artificial)
    raw = bytes.fromhex("00000000 04 01000000 2c000000 00000000 2000")
    assert EVENT_HEADER.unpack(raw) == (0, 4, 1, 44, 0, 0x20)
