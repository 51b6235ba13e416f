"""Gold's bulk method (``gold/bulk.py``): MariaDB's ``COM_STMT_BULK_EXECUTE`` wire form, byte
for byte, and real rows through a real MariaDB 10.11 read back as they were sent.

The round trip draws the values the text methods must escape (quotes, backslashes, NUL, tabs,
newlines, four-byte UTF-8) and lengths across every length-encoding boundary (250/251 bytes,
65,535/65,536), and compares what ``SELECT`` returns with the values sent, for the bulk
method and for multi-row INSERT text on the same rows.
"""

from __future__ import annotations

import datetime as dt
import random
import struct
import uuid

import pyarrow as pa
import pytest

from pipelines.errors import ConfigError
from pipelines.gold import ddl
from pipelines.gold.bulk import bulk_rows, command_parts
from pipelines.gold.client import connect
from pipelines.gold.exporter import write_chunk
from pipelines.gold.job import _server_method
from pipelines.mysql.client import offers_bulk_operations
from pipelines.mysql.dsn import Dsn


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


def test_each_row_in_the_bulk_wire_form() -> None:
    batch = pa.RecordBatch.from_pydict({
        "start_pos": pa.array([4, None], pa.int64()),
        "gtid": pa.array([None, "0-1-7"], pa.string()),
        "schema_name": pa.array(["db", "é" * 150], pa.string()),
    })
    rows = bulk_rows(batch).to_pylist()
    assert rows[0] == _hex("""
        00 0400000000000000   # start_pos: a value, 8 bytes little-endian
        01                    # gtid: NULL, nothing follows
        00 02 6462            # schema_name: a value, length 2, "db"
    """)
    assert rows[1] == _hex("""
        01                    # start_pos: NULL
        00 05 302d312d37      # gtid: length 5, "0-1-7"
        00 fc2c01             # schema_name: 300 bytes (150 x C3 A9): 0xFC, 2 bytes
    """) + "é".encode() * 150


def test_columns_of_nulls_and_mixed_lengths_in_the_wire_form() -> None:
    """Columns of NULLs alone (query_hash, commit_ts_us on MariaDB) are the NULL byte in
    every row; NULLs among values of 251 bytes and more keep each value's own prefix."""
    long = "x" * 300
    batch = pa.RecordBatch.from_pydict({
        "commit_ts_us": pa.array([None, None, None], pa.int64()),
        "query_hash": pa.array([None, None, None], pa.string()),
        "row_after": pa.array([long, None, "y"], pa.string()),
        "connection_id": pa.array([None, 7, None], pa.int64()),
    }).slice(1)
    assert bulk_rows(batch).to_pylist() == [
        _hex("01 01 01 00 0700000000000000"),
        _hex("01 01 00 01 79 01"),
    ]
    whole = pa.RecordBatch.from_pydict({"row_after": pa.array([long, None], pa.string())})
    assert bulk_rows(whole).to_pylist() == [_hex("00 fc2c01") + long.encode(), _hex("01")]


@pytest.mark.parametrize("length, prefix", [
    (0, "00"), (250, "fa"), (251, "fc fb00"), (65_535, "fc ffff"), (65_536, "fd 000001"),
    (16_777_215, "fd ffffff"), (16_777_216, "fe 0000000100000000"),
])
def test_length_encoding_boundaries(length: int, prefix: str) -> None:
    batch = pa.RecordBatch.from_pydict({"row_after": pa.array([b"x" * length], pa.binary())})
    row = bulk_rows(batch)[0].as_py()
    head = b"\x00" + bytes.fromhex(prefix.replace(" ", ""))
    assert row[:len(head)] == head and len(row) == len(head) + length


def test_commands_declare_the_types_and_split_at_the_limit() -> None:
    batch = pa.RecordBatch.from_pydict({"event_type": pa.array([1, 2, 3], pa.int8()),
                                        "table_name": pa.array(["t1", "t2", "t3"])})
    head = _hex("""
        07000000   # statement id 7
        8000       # flags: SEND_TYPES
        0800 fe00  # event_type LONGLONG, table_name STRING
    """)
    row = [bytes([0]) + struct.pack("<q", k) + b"\x00\x02t" + str(k).encode() for k in (1, 2, 3)]

    def commands(*args) -> list[bytes]:
        return [h + rows.to_pybytes() for h, rows in command_parts(7, batch, *args)]

    assert commands() == [head + b"".join(row)]
    # 13 bytes a row: a limit of two rows' bytes plus the head and the command byte
    assert commands(len(head) + 1 + 26) == [head + row[0] + row[1], head + row[2]]
    assert list(command_parts(7, batch.slice(0, 0))) == []


class _Greeting:
    """A server greeting's two facts, as pymysql parses them."""

    def __init__(self, version: str, capabilities: int) -> None:
        self.server_version, self.server_capabilities = version, capabilities


def test_bulk_only_where_the_server_offers_it() -> None:
    mariadb = _Greeting("5.5.5-10.11.19-MariaDB-0+deb12u1-log", 0x81FFF7FE)
    mysql = _Greeting("8.0.36", 0xDFFFFFFF)
    assert offers_bulk_operations(mariadb) and not offers_bulk_operations(mysql)
    for version, offers in (("10.2.7-MariaDB", True), ("5.5.5-10.2.6-MariaDB-log", False),
                            ("11.4.2-MariaDB", True), ("5.5.5-10.1.48-MariaDB", False)):
        assert offers_bulk_operations(_Greeting(version, 0x81FFF7FE)) == offers, version
    assert _server_method(mariadb, "auto", 2) == "bulk"
    with pytest.raises(ConfigError, match="gold.method: bulk needs MariaDB 10.2.7"):
        _server_method(mysql, "bulk", 2)


_SELECT = ("SELECT source_id, binlog_file, start_pos, end_pos, row_in_event, gtid, "
           "connection_id, schema_name, table_name, event_type, pk_values, changed_columns, "
           "row_before, row_after, schema_version, query_text, query_hash, commit_ts_us "
           "FROM binlog_events ORDER BY start_pos")


def _rows(seed: int, n: int) -> pa.RecordBatch:
    rnd = random.Random(seed)
    alphabet = ["a", "\\", "'", '"', "\t", "\n", "\r", "\x00", "é", "\U0001F600", "%", "|"]
    lengths = [0, 1, 250, 251, 65_535 // 4, 65_536, 70_000]

    def text(max_len: int | None = None) -> str | None:
        if rnd.random() < 0.15:
            return None
        k = rnd.choice([x for x in lengths if max_len is None or x <= max_len] or [0])
        return "".join(rnd.choice(alphabet) for _ in range(k))

    def json_text() -> str | None:  # JSON columns: a valid document with the drawn text
        t = text(300)
        return None if t is None else '{"v":' + _json_string(t) + "}"

    return pa.RecordBatch.from_pydict({
        "event_id": pa.array([rnd.randint(1, 2**63 - 1) for _ in range(n)], pa.int64()),
        "source_id": ["default"] * n, "binlog_file": ["mariadb-bin.000001"] * n,
        "start_pos": list(range(4, 4 + n)), "end_pos": [10**12 + i for i in range(n)],
        "row_in_event": [rnd.randint(0, 2**31) for _ in range(n)],
        "event_timestamp": ["2024-03-10 12:30:05"] * n,
        "gtid": [text(250) for _ in range(n)],
        "connection_id": pa.array([None if rnd.random() < 0.3 else rnd.randint(0, 2**32 - 1)
                                   for _ in range(n)], pa.int64()),  # INT UNSIGNED
        "schema_name": [(text(60) or "s")[:60] for _ in range(n)],
        "table_name": ["t"] * n, "event_type": pa.array([1, 2, 3] * (n // 3) + [1] * (n % 3),
                                                          pa.int8()),
        "pk_values": [(text(250) or "")[:500] or None for _ in range(n)],
        "changed_columns": [json_text() for _ in range(n)],
        "row_before": [json_text() for _ in range(n)],
        "row_after": [json_text() for _ in range(n)],
        "schema_version": pa.array([rnd.randint(0, 9) for _ in range(n)], pa.int64()),
        "query_text": [text() for _ in range(n)],
        "query_hash": [None] * n,
        "commit_ts_us": pa.array([None if rnd.random() < 0.5 else rnd.randint(0, 2**62)
                                  for _ in range(n)], pa.int64()),
    })


def _json_string(t: str) -> str:
    import json
    return json.dumps(t, ensure_ascii=False)


@pytest.mark.parametrize("seed", range(3))
def test_bulk_rows_read_back_as_sent(mariadb, seed: int) -> None:
    batch = _rows(seed, 60)
    sent = [tuple(r[c] for c in _SELECT[7:_SELECT.index(" FROM")].split(", "))
            for r in batch.to_pylist()]
    got = {}
    for method in ("bulk", "insert"):
        db = f"bulk_{seed}_{method}_{uuid.uuid4().hex[:6]}"
        mariadb.execute(f"CREATE DATABASE {db}")
        mariadb.execute(ddl.create_events_sql(dt.datetime(2024, 3, 10, 11), 4), db=db)
        conn = connect(Dsn.parse(mariadb.dsn(db)), autocommit=False, bulk=method == "bulk")
        try:
            assert getattr(conn, "bulk_operations", False) == (method == "bulk")
            assert write_chunk(conn, batch, method, 300_000) == 60  # several commands
            assert write_chunk(conn, batch, method, 300_000) == 0  # again: duplicate no-ops
        finally:
            conn.close()
        got[method] = [tuple(int(v) if isinstance(v, int) else v for v in r)
                       for r in mariadb.execute(_SELECT, db=db)]
        mariadb.execute(f"DROP DATABASE {db}")
    assert got["bulk"] == got["insert"] == sent


@pytest.mark.parametrize("extra", [0, 1, 2_000_000])
def test_a_command_past_16_mib_goes_in_several_packets(tmp_path, extra: int) -> None:
    # One row whose command is 16 MiB - 1 bytes exactly (a full packet, then an empty one),
    # one byte more, and 2 MB more (its JSON then past 16 MiB: a 9-byte length): the server
    # reads the same row back each time.
    from devtools.mariadb import MariaDBServer

    def batch(length: int) -> pa.RecordBatch:
        row = {c: None for c in ddl.EVENT_COLUMNS}
        row.update(source_id="default", binlog_file="mariadb-bin.000001", start_pos=4,
                   end_pos=90, row_in_event=0, event_timestamp="2024-03-10 12:30:05",
                   schema_name="app", table_name="t", event_type=1, schema_version="0",
                   row_after='{"pad":"' + "x" * length + '"}')
        return pa.RecordBatch.from_pylist([row], pa.schema(
            [(c, pa.int64() if isinstance(row[c], int) else pa.string())
             for c in ddl.EVENT_COLUMNS]))

    def command_size(b: pa.RecordBatch) -> int:
        (head, rows), = command_parts(1, b)
        return 1 + len(head) + rows.size  # the command byte, the head, the row

    base = 16_000_000
    length = base + (0xFFFFFF - command_size(batch(base))) + extra
    assert command_size(batch(length)) == 0xFFFFFF + extra if extra < 2 else (
        command_size(batch(length)) > 1 << 24)
    with MariaDBServer(workdir=tmp_path / "big_packet",
                       extra_options={"max_allowed_packet": "64M"}) as server:
        server.execute("CREATE DATABASE big")
        server.execute(ddl.create_events_sql(dt.datetime(2024, 3, 10, 11), 4), db="big")
        conn = connect(Dsn.parse(server.dsn("big")), autocommit=False, bulk=True)
        try:
            assert write_chunk(conn, batch(length), "bulk") == 1
            with conn.cursor() as cur:  # the connection goes on after the long command
                cur.execute("SELECT LENGTH(row_after) FROM binlog_events")
                assert cur.fetchall() == ((length + 10,),)
        finally:
            conn.close()
