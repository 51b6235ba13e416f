"""dbtrail's columns in the decoder: ``commit_ts_us`` (MySQL 8 GTID commit timestamps),
``query_text`` (MySQL ROWS_QUERY, MariaDB ANNOTATE_ROWS) and ``connection_id`` (the BEGIN's
thread id), from real bytes and whole corpus files.

Expected values come from the tools, never from our decoder: ``mysqlbinlog -vv --hexdump``
output shipped with the corpus (``rust-us__mysql-cdc-rs/expected``, MySQL 5.7.30 and 8.2.0)
and ``mariadb-binlog -vv`` run here on the MariaDB file.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.binlog import events as ev
from pipelines.binlog.parser import ChecksumPolicy
from pipelines.binlog.reader import BinlogFileReader
from pipelines.bronze.records import BronzeBatcher, file_batches
from tests.binlog.test_decoder_events import ANONYMOUS_GTID, FDE, GTID_TAGGED_BODY, event, parse_all

RUST_US = "rust-us__mysql-cdc-rs"
MARIADB_FILE = "blackbeam__rust_mysql_common/test-data__binlogs__mariadb-bin.000001"

# MySQL 8.2.0 FORMAT_DESCRIPTION (tests__events__8.0__31_update_rows_v2__binlog.000001 at 4).
FDE_82 = bytes.fromhex(
    "07968a65" "0f" "01000000" "7a000000" "7e000000" "0100"  # header: FDE, 122 bytes
    "0400" + "382e322e30".ljust(100, "0")  # binlog v4, "8.2.0" NUL-padded to 50 bytes
    + "07968a65" "13"  # created, header length 19
    "000d0008000000000400040000006200041a08000000080808020000000a0a0a2a2a001234000a2800"
    "01"  # checksum alg CRC32
    "666ca6a9")
# The same file at 1132: ANONYMOUS_GTID of the UPDATE's transaction. mysqlbinlog prints
# last_committed=3 sequence_number=4 original_committed_timestamp=1703581289681456
# immediate_commit_timestamp=1703581289681456 transaction_length=330.
ANONYMOUS_GTID_82 = bytes.fromhex(
    "69968a65" "22" "01000000" "4f000000" "bb040000" "0000"  # header: ANONYMOUS_GTID, 79 B
    "00"  # flags
    "00000000000000000000000000000000"  # no source uuid
    "0000000000000000"  # gno 0
    "02" "0300000000000000" "0400000000000000"  # logical clock: last_committed 3, seq 4
    "30129eed650d06"  # immediate_commit_timestamp, 7 bytes LE; bit 55 clear: original equal
    "fc4a01"  # transaction_length 330 (packed int 0xfc + 2 bytes)
    "48390100"  # immediate_server_version 80200; bit 31 clear: original equal
    "3a7bfec3")
# At 1211: the BEGIN (mysqlbinlog: Query thread_id=8).
BEGIN_82 = bytes.fromhex(
    "69968a65" "02" "01000000" "54000000" "0f050000" "0800"  # header: QUERY, 84 bytes
    "08000000" "00000000" "04" "0000" "2600"  # thread 8, exec 0, db_len 4, error 0, 38 B vars
    "0000000000012000a04500000000060373746404ff00ff00210009010000000000000012ff00"
    "7465737400"  # "test" NUL
    "424547494e"  # "BEGIN"
    "138d9e69")
# MySQL 5.7.30 ROWS_QUERY (tests__events__5.7__29_row_query__log.bin at 802); mysqlbinlog:
# "Rows_query / # INSERT INTO `boxercrab` (`title`) VALUES ('hahhhhhhhhh')".
ROWS_QUERY_57 = bytes.fromhex(
    "3abf235f" "1d" "01000000" "50000000" "72030000" "8000"  # header: ROWS_QUERY, 80 bytes
    "38"  # length byte (56; ignored: it is cut to 255 on long statements)
    "494e5345525420494e544f2060626f78657263726162602028607469746c6560292056414c554553"
    "20282768616868686868686868682729"  # the statement, to the event end
    "edc09ae6")
# MariaDB 10.5.15 (mariadb-bin.000001): GTID 0-1-1 at 330 and ANNOTATE_ROWS at 372;
# mariadb-binlog: "GTID 0-1-1 trans", "#Q> insert into outbox (topic, event_type, event)
# values ('foo', 'JSON', '{"foo":1}')".
MARIA_GTID = bytes.fromhex(
    "9c866062" "a2" "01000000" "2a000000" "74010000" "0800"  # header: MARIA_GTID, 42 bytes
    "0100000000000000" "00000000" "0c"  # seq_no 1, domain 0, flags: TRANSACTIONAL|ALLOW_PARALLEL
    "000000000000"  # padding to the fixed 19-byte body
    "cb1ef90a")
ANNOTATE_ROWS = bytes.fromhex(
    "9c866062" "a0" "01000000" "68000000" "dc010000" "0000"  # header: ANNOTATE_ROWS, 104 B
    "696e7365727420696e746f206f7574626f782028746f7069632c206576656e745f747970652c206576656e"
    "74292076616c756573202827666f6f272c20274a534f4e272c20277b22666f6f223a317d2729"
    "bf36553e")
# GTID_TAGGED_BODY (MySQL 9.6, tests/binlog/test_decoder_events.py): field 6 (0x0c) is
# immediate_commit_timestamp, varlen "7f1cf3b814244a06" = 1770368687207196; the events of that
# transaction in the file carry header timestamp 1770368687.


def test_mysql8_gtid_commit_timestamp_and_begin_thread() -> None:
    _, gtid, begin = parse_all(FDE_82, ANONYMOUS_GTID_82, BEGIN_82)
    assert isinstance(gtid, ev.Gtid) and gtid.gtid is None
    assert gtid.commit_ts_us == 1703581289681456
    assert isinstance(begin, ev.Query) and begin.thread_id == 8 and begin.query == b"BEGIN"


def test_mysql57_gtid_has_no_commit_timestamp() -> None:
    _, gtid = parse_all(FDE, ANONYMOUS_GTID)
    assert gtid.commit_ts_us is None


def test_rows_query_and_annotate_rows_text() -> None:
    _, rq = parse_all(FDE, ROWS_QUERY_57)
    assert isinstance(rq, ev.RowsQuery)
    assert rq.query == b"INSERT INTO `boxercrab` (`title`) VALUES ('hahhhhhhhhh')"
    _, g, ann = parse_all(FDE, MARIA_GTID, ANNOTATE_ROWS)
    assert g.gtid == "0-1-1" and g.commit_ts_us is None
    assert ann.query == b"insert into outbox (topic, event_type, event) values " \
                        b"('foo', 'JSON', '{\"foo\":1}')"


def test_gtid_tagged_commit_timestamp() -> None:
    (_, g) = parse_all(FDE, event(42, GTID_TAGGED_BODY[:-4]), checksum=ChecksumPolicy.IGNORE)
    assert g.commit_ts_us == 1770368687207196
    assert g.commit_ts_us // 1_000_000 == 1770368687  # the transaction's event timestamps


# -- whole files: every row change against the tool's output ---------------------------------

def _bronze(path: Path, statement_text: bool = True) -> list[dict]:
    reader = BinlogFileReader(str(path))
    batcher = BronzeBatcher(source_id="s", binlog_file=path.name, batch_rows=3,
                            statement_text=statement_text)
    table = pa.Table.from_batches(list(file_batches(reader, batcher, reader)))
    return [r for r in table.select(["start_pos", "event_type", "query_text", "commit_ts_us",
                                     "connection_id"]).to_pylist()
            if r["event_type"] in ("INSERT", "UPDATE", "DELETE")]


def _dump_lines(path: Path) -> list[str]:
    raw = path.read_bytes()
    text = raw.decode("utf-16") if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else raw.decode()
    return text.splitlines()


def _mysqlbinlog_changes(path: Path) -> list[tuple[int | None, str | None, int | None]]:
    """Per row change in a ``mysqlbinlog -vv`` dump: (original_committed_timestamp, the
    Rows_query text, the thread_id of its transaction's BEGIN)."""
    out = []
    ts = text = thread = None
    lines = _dump_lines(path)
    for i, line in enumerate(lines):
        if m := re.search(r"GTID\t.*original_committed_timestamp=(\d+)", line):
            ts, text, thread = int(m.group(1)), None, None
        elif re.search(r"\tGTID\t|Anonymous_GTID\t", line):
            ts, text, thread = None, None, None
        elif m := re.search(r"\tQuery\tthread_id=(\d+)", line):
            if thread is None:
                thread = int(m.group(1))
        elif line.strip() == "# \tRows_query" or line.endswith("\tRows_query"):
            text = lines[i + 1][2:]
        elif re.match(r"### (INSERT INTO|UPDATE|DELETE FROM) ", line):
            out.append((ts, text, thread))
        elif line.startswith("COMMIT") or "\tXid = " in line:
            ts, text, thread = None, None, None
    return out


@pytest.mark.parametrize("name", [
    "tests__events__8.0__31_update_rows_v2__binlog.000001",
    "tests__events__8.0__32_delete_rows_v2__binlog.000001",
    "tests__events__8.0__19_30_Table_map_event_Write_rows_log_event__binlog.000018",
    "tests__events__5.7__29_row_query__log.bin",
    "tests__events__5.7__32_delete_rows_v2__log.bin",
])
def test_row_changes_carry_what_mysqlbinlog_prints(corpus: Path, name: str) -> None:
    stem = name.rsplit("__", 1)[0]
    dump = corpus / RUST_US / "expected" / f"{stem}__dump.txt"
    expected = _mysqlbinlog_changes(dump)
    ours = _bronze(corpus / RUST_US / name)
    assert expected and len(ours) == len(expected)
    assert [(r["commit_ts_us"], r["query_text"], r["connection_id"]) for r in ours] == expected
    if "5.7" in name:
        assert all(r["query_text"] for r in ours)  # the files were written with ROWS_QUERY on
    else:
        assert all(r["commit_ts_us"] for r in ours)


def test_mariadb_annotate_rows_match_mariadb_binlog(corpus: Path) -> None:
    path = corpus / MARIADB_FILE
    out = subprocess.run(["mariadb-binlog", "-vv", "--base64-output=decode-rows", str(path)],
                         capture_output=True, text=True, check=True).stdout
    expected, text = [], None
    for line in out.splitlines():
        if line.startswith("#Q> "):
            text = line[4:] if text is None else text + "\n" + line[4:]
        elif re.match(r"### (INSERT INTO|UPDATE|DELETE FROM) ", line):
            expected.append(text)
        elif line.startswith("COMMIT"):
            text = None
    ours = _bronze(path)
    assert expected and [r["query_text"] for r in ours] == expected
    # MariaDB logs no commit timestamp, and no BEGIN event (the GTID event opens the
    # transaction), so no thread id for row changes either: NULL, as in dbtrail.
    assert all(r["commit_ts_us"] is None and r["connection_id"] is None for r in ours)


def test_decode_shows_statements_and_commit_times(corpus: Path, capsys) -> None:
    from pipelines.cli.main import main

    path = corpus / MARIADB_FILE
    assert main(["decode", str(path)]) == 0
    ours = [x for x in capsys.readouterr().out.splitlines() if x.startswith("#Q> ")]
    tool = subprocess.run(["mariadb-binlog", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert ours and ours == [x for x in tool.splitlines() if x.startswith("#Q> ")]
    mysql8 = corpus / RUST_US / "tests__events__8.0__31_update_rows_v2__binlog.000001"
    assert main(["decode", "--format", "jsonl", str(mysql8)]) == 0
    gtids = {o["pos"]: o["commit_ts_us"] for o in map(json.loads, capsys.readouterr().out
                                                       .splitlines()) if "commit_ts_us" in o}
    assert gtids[1132] == 1703581289681456  # mysqlbinlog: original_committed_timestamp


def test_statement_text_is_kept_only_when_asked(corpus: Path) -> None:
    # bronze.statement_text is off by default: a statement of N rows would be stored N times
    # (a 60 MB MariaDB binlog of multi-row INSERTs: 9.4 GB peak and 50x the time).
    path = corpus / RUST_US / "tests__events__5.7__29_row_query__log.bin"
    kept = [r["query_text"] for r in _bronze(path)]
    assert kept and all(kept)
    assert [r["query_text"] for r in _bronze(path, statement_text=False)] == [None] * len(kept)
