"""Table-driven hex tests for framing, FORMAT_DESCRIPTION, GTID, QUERY, TABLE_MAP, ROWS, XID.

The bytes are real: MySQL 5.7.21 (CRC32) events from the corpus file
``osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32``
(positions 4–517). ``mariadb-binlog -vv`` on that file shows the same values (checked by
``test_corpus.py``); the expected values below are what that tool prints.
"""

from __future__ import annotations

import io

import pytest

from pipelines.bronze import events as ev
from pipelines.bronze.framing import MAGIC, iter_raw_events
from pipelines.bronze.parser import BinlogParser, ChecksumPolicy
from pipelines.bronze.table_map import TableMap
from pipelines.errors import (ChecksumError, MissingTableMapError, NotABinlogError,
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
