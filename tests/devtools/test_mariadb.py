"""The MariaDB harness, the workload, the shipped samples and the mariadb-binlog reference reader.

Sample tests need only the ``mariadb-binlog`` tool; tests marked ``mariadb`` start a server.
The reference reader is checked against facts it does not compute itself: the server's
affected-row counts, the binlog's own event framing (header sizes and next positions) and
the tables' final contents read with SELECT (``samples/binlogs/expected_tables.json``).
"""

from __future__ import annotations

import json
import re
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.binlog_verbose import (
    LOSSY,
    RowChange,
    is_unsigned,
    mariadb_binlog_path,
    normalize_printed,
    printed_matches,
    read_row_changes,
)
from devtools.mariadb import MariaDBServer, MariaDBStartError
from devtools.mixed_workload import WORKLOAD_TABLES, run_mixed_workload

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
ROWS_EVENT_TYPES = {23, 24, 25}  # WRITE/UPDATE/DELETE_ROWS_EVENT_V1 (MariaDB writes v1)

# `make test` installs MariaDB first: a missing server or tool is a failure, never a skip.
needs_tool = pytest.mark.mariadb
needs_server = pytest.mark.mariadb


def sample_files() -> list[Path]:
    return sorted(SAMPLES.glob("mariadb-bin.[0-9]*"))


def event_starts(path: Path) -> dict[int, tuple[int, int, int]]:
    """Every event's start → (type code, size, next position), walking the headers."""
    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    out: dict[int, tuple[int, int, int]] = {}
    pos = 4
    while pos < len(data):
        _ts, type_code, _sid, size, next_pos, _flags = struct.unpack_from("<IBIIIH", data, pos)
        out[pos] = (type_code, size, next_pos)
        pos += size
    assert pos == len(data)
    return out


@pytest.fixture(scope="module")
def sample_changes() -> list[RowChange]:
    if mariadb_binlog_path() is None:
        pytest.fail("mariadb-binlog not installed (run `make mariadb`)")
    return [c for f in sample_files() for c in read_row_changes(f)]


@pytest.fixture(scope="module")
def expected_tables() -> dict[str, Any]:
    return json.loads((SAMPLES / "expected_tables.json").read_text(encoding="utf-8"))["tables"]


# --- the shipped samples -----------------------------------------------------------------

def test_samples_are_small_and_complete() -> None:
    files = sample_files()
    assert [f.name for f in files] == [f"mariadb-bin.{i:06d}" for i in range(1, len(files) + 1)]
    assert len(files) >= 4
    assert sum(f.stat().st_size for f in files) < 1_000_000
    assert (SAMPLES / "README.md").exists()
    assert not (SAMPLES / "mariadb-bin.index").exists()


@needs_tool
def test_sample_row_change_counts(sample_changes: list[RowChange],
                                  expected_tables: dict[str, Any]) -> None:
    by_type = Counter(c.event_type for c in sample_changes)
    # The workload's affected-row counts, as recorded in the README by make_sample_binlog.
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    m = re.search(r"(\d+) row changes \(DELETE (\d+), INSERT (\d+), UPDATE (\d+)\)", readme)
    assert m, "README lost its workload counts"
    total, deletes, inserts, updates = map(int, m.groups())
    assert len(sample_changes) == total
    assert by_type == {"INSERT": inserts, "UPDATE": updates, "DELETE": deletes}
    # and, independently, inserts - deletes = final rows (SELECT COUNT(*) per table)
    for table, spec in expected_tables.items():
        schema, name = table.split(".")
        mine = Counter(c.event_type for c in sample_changes
                       if (c.schema, c.table) == (schema, name))
        assert mine["INSERT"] - mine["DELETE"] == len(spec["rows"]), table


@needs_tool
def test_sample_positions_are_rows_event_starts(sample_changes: list[RowChange]) -> None:
    starts = {f.name: event_starts(f) for f in sample_files()}
    seen: dict[tuple[str, int], list[int]] = {}
    for c in sample_changes:
        type_code, size, next_pos = starts[c.file][c.start_pos]
        assert type_code in ROWS_EVENT_TYPES, (c.file, c.start_pos, type_code)
        assert c.start_pos + size == c.end_pos == next_pos
        seen.setdefault((c.file, c.start_pos), []).append(c.row_in_event)
    for indexes in seen.values():
        assert indexes == list(range(len(indexes)))
    # Every rows event of the files has rows attributed to it.
    all_rows_events = {(f, p) for f, evs in starts.items()
                       for p, (t, _s, _n) in evs.items() if t in ROWS_EVENT_TYPES}
    assert set(seen) == all_rows_events
    # A statement split over several rows events was resolved (the big MEDIUMTEXT insert).
    split = [c for c in sample_changes if c.table == "texts" and c.event_type == "INSERT"]
    assert len({c.start_pos for c in split}) > 1


@needs_tool
def test_sample_gtids_and_tables(sample_changes: list[RowChange]) -> None:
    assert all(c.gtid and re.fullmatch(r"0-1-\d+", c.gtid) for c in sample_changes)
    seqs = [int(c.gtid.split("-")[2]) for c in sample_changes if c.gtid]
    assert seqs == sorted(seqs)
    orders = [c for c in sample_changes if c.table == "orders" and c.event_type == "INSERT"]
    assert len(orders) == 200 and len({c.gtid for c in orders}) == 1  # one transaction
    assert {f"{c.schema}.{c.table}" for c in sample_changes} == set(WORKLOAD_TABLES)
    assert all(c.columns is not None for c in sample_changes)  # FULL metadata


def _server_to_bronze(value: Any, column_type: str, charset: str | None) -> bytes | None:
    """What bronze should hold for a value the text protocol returned (see README quirks)."""
    if value is None:
        return None
    ctype = column_type.lower()
    if isinstance(value, dict):
        raw = bytes.fromhex(value["hex"])
        if ctype.startswith("bit("):
            return str(int.from_bytes(raw, "big")).encode()
        if ctype.startswith("binary("):
            return raw.rstrip(b"\x00")  # the row image stores BINARY without its 0x00 padding
        return raw
    text = str(value)
    if ctype.startswith("year"):
        return b"0" if text == "0000" else text.encode()
    if ctype.startswith("enum("):
        labels = re.findall(r"'((?:[^']|'')*)'", ctype)
        return str(labels.index(text.lower()) + 1 if text else 0).encode()
    if ctype.startswith("set("):
        labels = re.findall(r"'((?:[^']|'')*)'", ctype)
        mask = sum(1 << labels.index(m) for m in text.split(",") if m)
        return str(mask).encode()
    if ctype == "double":
        return repr(float(text)).encode()
    if charset is not None:
        return text.encode({"latin1": "latin-1", "utf8mb4": "utf-8"}.get(charset, charset))
    return text.encode()


@needs_tool
def test_replaying_printed_changes_gives_the_final_tables(
        sample_changes: list[RowChange], expected_tables: dict[str, Any]) -> None:
    """Apply every printed change to an empty copy; normalise; compare with SELECT's view."""
    state: dict[str, list[tuple[list[str | None], list[str]]]] = {t: [] for t in expected_tables}
    for c in sample_changes:
        rows = state[f"{c.schema}.{c.table}"]
        if c.before is not None:
            match = [r for r in rows if r[0] == c.before]
            assert match, (c.file, c.start_pos, "before image is not a current row")
            rows.remove(match[0])
        if c.after is not None:
            assert c.after_types is not None
            rows.append((c.after, c.after_types))
    lossy_seen = 0
    for table, spec in expected_tables.items():
        declared = next(c.column_types for c in sample_changes
                        if f"{c.schema}.{c.table}" == table)
        assert declared is not None
        want = sorted(([_server_to_bronze(v, t, cs) for v, t, cs in
                        zip(row, spec["column_types"], spec["charsets"])]
                       for row in spec["rows"]), key=_sort_key)
        got = sorted(([normalize_printed(v, comments[i], unsigned=is_unsigned(declared[i]))
                       for i, v in enumerate(values)] for values, comments in state[table]),
                     key=_sort_key)
        assert len(got) == len(want), table
        for g, w in zip(got, want):
            for i, (gv, wv) in enumerate(zip(g, w)):
                if gv is LOSSY:  # FLOAT: printed with 6 significant digits, so is SELECT's
                    lossy_seen += 1
                    assert wv is not None and "float" in spec["column_types"][i]
                    continue
                assert gv == wv, (table, spec["columns"][i], gv, wv)
    assert lossy_seen > 0


def _sort_key(row: list[Any]) -> list[tuple[int, bytes]]:
    return [(0, b"") if v is None else (1, b"~" if v is LOSSY else v) for v in row]


# --- normaliser units (printed forms copied from real mariadb-binlog 10.11 output) -----------

@pytest.mark.parametrize("printed, comment, unsigned, bronze", [
    ("-1 (4294967295)", "INT meta=0 nullable=1 is_null=0", True, b"4294967295"),
    ("-1 (4294967295)", "INT meta=0 nullable=1 is_null=0", False, b"-1"),
    ("-1 (4294967295)", "INT meta=0 nullable=1 is_null=0", None, b"-1"),
    ("-9223372036854775808 (9223372036854775808)", "LONGINT meta=0 nullable=1 is_null=0",
     False, b"-9223372036854775808"),
    ("127", "TINYINT meta=0 nullable=1 is_null=0", True, b"127"),
    ("-0.50", "DECIMAL(10,2) meta=2562 nullable=1 is_null=0", None, b"-0.50"),
    ("0.10000000000000000555", "DOUBLE meta=8 nullable=1 is_null=0", None, b"0.1"),
    ("1.0000000000000000159e+100", "DOUBLE meta=8 nullable=1 is_null=0", None, b"1e+100"),
    ("b'1000000000000000000000000000000000000000000000000000000000000001'",
     "BIT(64) meta=2048 nullable=1 is_null=0", None, b"9223372036854775809"),
    ("b'0'", "BIT(1) meta=1 nullable=1 is_null=0", None, b"0"),
    ("1900", "YEAR meta=0 nullable=1 is_null=0", None, b"0"),
    ("2155", "YEAR meta=0 nullable=1 is_null=0", None, b"2155"),
    ("'0000:00:00'", "DATE meta=0 nullable=1 is_null=0", None, b"0000-00-00"),
    ("'2024:02:29'", "DATE meta=0 nullable=1 is_null=0", None, b"2024-02-29"),
    ("'-00:00:00.500000'", "TIME(6) meta=6 nullable=1 is_null=0", None, b"-00:00:00.500000"),
    ("'-838:59:59'", "TIME(0) meta=0 nullable=1 is_null=0", None, b"-838:59:59"),
    ("'2024-02-29 12:00:00.120'", "DATETIME(3) meta=3 nullable=1 is_null=0", None,
     b"2024-02-29 12:00:00.120"),
    ("0.000000", "TIMESTAMP(6) meta=6 nullable=1 is_null=0", None,
     b"0000-00-00 00:00:00.000000"),
    ("0", "TIMESTAMP(0) meta=0 nullable=1 is_null=0", None, b"0000-00-00 00:00:00"),
    ("1717245296.500000", "TIMESTAMP(6) meta=6 nullable=1 is_null=0", None,
     b"2024-06-01 12:34:56.500000"),
    ("2147483647", "TIMESTAMP(0) meta=0 nullable=1 is_null=0", None, b"2038-01-19 03:14:07"),
    ("0", "ENUM(1 byte) meta=63233 nullable=1 is_null=0", None, b"0"),
    ("b'00001111'", "SET(1 bytes) meta=63489 nullable=1 is_null=0", None, b"15"),
    ("'\\x00\xff\\x00abc'".encode("latin-1").decode("utf-8", "surrogateescape"),
     "BLOB/TEXT meta=2 nullable=1 is_null=0", None, b"\x00\xff\x00abc"),
    ("'line1\\x0aback\\slash 'q''", "BLOB/TEXT meta=2 nullable=1 is_null=0", None,
     b"line1\nback\\slash 'q'"),
    ("'\\x41'", "VARSTRING(64) meta=64 nullable=1 is_null=0", None, b"\\x41"),
    ("'caf\u00e9'", "STRING(40) meta=65064 nullable=1 is_null=0", None, "café".encode()),
    ("''", "STRING(4) meta=65028 nullable=1 is_null=0", None, b""),
    ("'NULL'", "VARSTRING(40) meta=40 nullable=1 is_null=0", None, b"NULL"),
    (None, "INT meta=0 nullable=1 is_null=1", None, None),
])
def test_normalize_printed(printed: str | None, comment: str, unsigned: bool | None,
                           bronze: bytes | None) -> None:
    assert normalize_printed(printed, comment, unsigned=unsigned) == bronze
    assert printed_matches(printed, comment, bronze, unsigned=unsigned)


def test_float_is_lossy_but_comparable() -> None:
    comment = "FLOAT meta=4 nullable=1 is_null=0"
    assert normalize_printed("-3.40282e+38        ", comment) is LOSSY
    assert printed_matches("-3.40282e+38        ", comment, b"-3.4028235e+38")
    assert printed_matches("1.1                 ", comment, b"1.1")
    assert not printed_matches("1.1                 ", comment, b"1.2")


# --- a real server -----------------------------------------------------------------------

@pytest.mark.mariadb
@needs_server
def test_server_starts_quickly_and_answers(mariadb: MariaDBServer) -> None:
    assert mariadb.running and mariadb.start_seconds is not None
    assert mariadb.start_seconds < 15
    assert "MariaDB" in mariadb.version()
    rows = mariadb.execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, "
                           "@@binlog_row_metadata, @@bind_address, @@time_zone")
    assert rows == [(1, "ROW", "FULL", "FULL", "127.0.0.1", "+00:00")]
    dsn = mariadb.dsn("shop")
    assert re.fullmatch(rf"mysql://root:[^@/]+@127\.0\.0\.1:{mariadb.port}/shop", dsn)
    assert "root:" not in repr(mariadb)
    assert mariadb.binlog_files()[0].parent == mariadb.binlog_dir


@pytest.mark.mariadb
@needs_server
def test_workload_rotates_and_reader_agrees(mariadb: MariaDBServer) -> None:
    mariadb.flush_logs()  # the workload starts in a fresh file: the last one listed now
    before = set(mariadb.binlog_files()[:-1])
    conn = mariadb.connect()
    try:
        summary = run_mixed_workload(conn, seed=1)
    finally:
        conn.close()
    mariadb.flush_logs()
    files = [f for f in mariadb.binlog_files() if f not in before]
    assert len(files) >= summary.flushes + 1 >= 4
    changes = [c for f in files for c in read_row_changes(f)]
    got = Counter((f"{c.schema}.{c.table}", c.event_type) for c in changes)
    assert got == +summary.row_changes
    for f in files:
        starts = event_starts(f)
        for c in changes:
            if c.file == f.name:
                assert starts[c.start_pos][0] in ROWS_EVENT_TYPES
    counts = {t: mariadb.execute(f"SELECT COUNT(*) FROM {t}")[0][0] for t in WORKLOAD_TABLES}
    for t, n in counts.items():
        assert summary.row_changes[(t, "INSERT")] - summary.row_changes[(t, "DELETE")] == n


@pytest.mark.mariadb
@needs_server
def test_server_options_minimal_no_checksum_small_files() -> None:
    with MariaDBServer(binlog_row_metadata="MINIMAL", binlog_checksum="NONE", server_id=7,
                       max_binlog_size=4096,
                       extra_options={"binlog_row_event_max_size": 1024}) as server:
        assert server.execute("SELECT @@binlog_row_metadata, @@binlog_checksum, @@server_id, "
                              "@@max_binlog_size") == [("MINIMAL", "NONE", 7, 4096)]
        server.execute("CREATE DATABASE d")
        server.execute("CREATE TABLE d.t (id INT UNSIGNED PRIMARY KEY, v VARCHAR(200))")
        for i in range(30):
            server.execute("INSERT INTO d.t VALUES (%s, %s)", (4294967295 - i, "v" * 150))
        server.execute("UPDATE d.t SET v = 'w'")  # one statement, split over rows events
        files = server.binlog_files()
        assert len(files) > 2  # rotated by size
        changes = [c for f in files for c in read_row_changes(f)]
        assert Counter(c.event_type for c in changes) == {"INSERT": 30, "UPDATE": 30}
        assert {c.gtid.split("-")[1] for c in changes if c.gtid} == {"7"}
        updates = [c for c in changes if c.event_type == "UPDATE"]
        assert len({c.start_pos for c in updates}) > 1
        first = changes[0]
        assert first.columns is None and first.column_types is not None  # MINIMAL metadata
        assert first.after is not None
        assert normalize_printed(first.after[0], first.after_types[0],  # type: ignore[index]
                                 unsigned=is_unsigned(first.column_types[0])) == b"4294967295"
        for f in files:
            starts = event_starts(f)
            for c in changes:
                if c.file == f.name:
                    assert c.start_pos + starts[c.start_pos][1] == c.end_pos


@pytest.mark.mariadb
@needs_server
def test_failed_start_reports_error_log() -> None:
    server = MariaDBServer(extra_options={"no-such-option": 1})
    with pytest.raises(MariaDBStartError, match="unknown variable"):
        server.start()
    assert not server.running
