"""A deterministic mixed workload that exercises every common column type.

:func:`run_mixed_workload` (re)creates schemas ``shop`` and ``ops`` and runs DDL and DML
covering integer extremes (signed and unsigned), DECIMAL, FLOAT/DOUBLE, BIT, YEAR, dates and
times with fractions (negative TIME, zero dates with ``sql_mode=''``), TIMESTAMP, latin1 and
utf8mb4 text (accents, emoji), binary strings with 0x00/0xff, ENUM, SET, JSON, GEOMETRY,
string primary keys with ``|`` and ``\\``, a composite primary key declared out of column
order, a primary-key update, a table without a primary key, row events large enough to be
split, a 200-insert transaction and NULLs in every nullable column. It rotates the binlog
(``FLUSH BINARY LOGS``) three times, so the workload spans four files.

The returned :class:`WorkloadSummary` counts the row changes each statement reported
(``cursor.rowcount``, i.e. affected rows), per table and event type: an independent count
for tests that parse the binlog. Every UPDATE changes its rows (an unchanged row is not
logged, and not counted as affected either).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["WorkloadSummary", "run_mixed_workload", "WORKLOAD_TABLES", "SCHEMAS"]

SCHEMAS = ("shop", "ops")

_DDL: dict[str, str] = {
    "shop.ints": """
        CREATE TABLE shop.ints (
          id INT NOT NULL PRIMARY KEY,
          t TINYINT NULL, tu TINYINT UNSIGNED NULL,
          s SMALLINT NULL, su SMALLINT UNSIGNED NULL,
          m MEDIUMINT NULL, mu MEDIUMINT UNSIGNED NULL,
          i INT NULL, iu INT UNSIGNED NULL,
          b BIGINT NULL, bu BIGINT UNSIGNED NULL
        ) ENGINE=InnoDB""",
    "shop.nums": """
        CREATE TABLE shop.nums (
          id INT NOT NULL PRIMARY KEY,
          price DECIMAL(10,2) NULL,
          huge DECIMAL(65,30) NULL,
          f FLOAT NULL,
          d DOUBLE NULL,
          bit1 BIT(1) NULL,
          bit64 BIT(64) NULL,
          y YEAR NULL
        ) ENGINE=InnoDB""",
    "shop.times": """
        CREATE TABLE shop.times (
          id INT NOT NULL PRIMARY KEY,
          d DATE NULL,
          t0 TIME(0) NULL,
          t6 TIME(6) NULL,
          dt0 DATETIME(0) NULL,
          dt3 DATETIME(3) NULL,
          dt6 DATETIME(6) NULL,
          ts6 TIMESTAMP(6) NULL DEFAULT NULL,
          ts0 TIMESTAMP NULL DEFAULT NULL
        ) ENGINE=InnoDB""",
    "shop.texts": """
        CREATE TABLE shop.texts (
          code VARCHAR(40) CHARACTER SET utf8mb4 NOT NULL PRIMARY KEY,
          c_latin CHAR(10) CHARACTER SET latin1 NULL,
          v_latin VARCHAR(50) CHARACTER SET latin1 NULL,
          c_utf CHAR(10) CHARACTER SET utf8mb4 NULL,
          v_utf VARCHAR(50) CHARACTER SET utf8mb4 NULL,
          v500 VARCHAR(500) CHARACTER SET utf8mb4 NULL,
          txt TEXT CHARACTER SET utf8mb4 NULL,
          mtxt MEDIUMTEXT CHARACTER SET utf8mb4 NULL
        ) ENGINE=InnoDB""",
    "shop.blobs": """
        CREATE TABLE shop.blobs (
          id INT NOT NULL PRIMARY KEY,
          blb BLOB NULL,
          vb VARBINARY(64) NULL,
          b4 BINARY(4) NULL,
          size ENUM('small','medium','large') NULL,
          tags SET('a','b','c','d') NULL,
          doc JSON NULL,
          geo GEOMETRY NULL
        ) ENGINE=InnoDB""",
    # Composite primary key declared in another order than the columns.
    "shop.order_lines": """
        CREATE TABLE shop.order_lines (
          line_no SMALLINT UNSIGNED NOT NULL,
          sku VARCHAR(20) NOT NULL,
          order_id BIGINT UNSIGNED NOT NULL,
          qty INT NOT NULL,
          note VARCHAR(100) NULL,
          PRIMARY KEY (order_id, line_no)
        ) ENGINE=InnoDB""",
    "shop.orders": """
        CREATE TABLE shop.orders (
          order_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
          customer VARCHAR(60) CHARACTER SET utf8mb4 NOT NULL,
          total DECIMAL(10,2) NOT NULL,
          status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
          placed_at DATETIME(3) NOT NULL,
          flags SET('gift','express','fragile') NOT NULL DEFAULT ''
        ) ENGINE=InnoDB""",
    "ops.events": """
        CREATE TABLE ops.events (
          id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
          kind VARCHAR(20) NOT NULL,
          payload JSON NULL,
          at TIMESTAMP(3) NULL DEFAULT NULL
        ) ENGINE=InnoDB""",
    # No primary key: row images are the only way to identify rows.
    "ops.heap": """
        CREATE TABLE ops.heap (
          k VARCHAR(10) NULL,
          v INT NULL
        ) ENGINE=InnoDB""",
}

WORKLOAD_TABLES: tuple[str, ...] = tuple(_DDL)

# Primary key (or, for ops.heap, all columns) to order SELECTs by.
ORDER_BY: dict[str, str] = {
    "shop.ints": "id", "shop.nums": "id", "shop.times": "id", "shop.texts": "code",
    "shop.blobs": "id", "shop.order_lines": "order_id, line_no", "shop.orders": "order_id",
    "ops.events": "id", "ops.heap": "k, v",
}


@dataclass
class WorkloadSummary:
    """What the workload did: tables, statements run and row changes reported."""

    tables: list[str]
    statements: int = 0
    flushes: int = 0
    # (table, "INSERT"|"UPDATE"|"DELETE") -> affected rows
    row_changes: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def total_row_changes(self) -> int:
        return sum(self.row_changes.values())

    def changes_by_type(self) -> dict[str, int]:
        """Affected rows per event type across all tables."""
        out: Counter[str] = Counter()
        for (_table, kind), n in self.row_changes.items():
            out[kind] += n
        return dict(out)


class _Runner:
    """Executes statements and books affected rows against (table, kind)."""

    def __init__(self, conn: Any, summary: WorkloadSummary) -> None:
        self.cur = conn.cursor()
        self.summary = summary

    def sql(self, stmt: str, params: Sequence[Any] | None = None) -> int:
        self.summary.statements += 1
        return int(self.cur.execute(stmt, params))

    def dml(self, table: str, kind: str, stmt: str, params: Sequence[Any] | None = None) -> int:
        n = self.sql(stmt, params)
        self.summary.row_changes[(table, kind)] += n
        return n

    def many(self, table: str, columns: str, rows: Sequence[Sequence[Any]]) -> int:
        """One multi-row INSERT."""
        placeholders = ", ".join("(" + ", ".join(["%s"] * len(r)) + ")" for r in rows)
        flat = [v for r in rows for v in r]
        return self.dml(table, "INSERT", f"INSERT INTO {table} ({columns}) VALUES {placeholders}", flat)

    def flush(self) -> None:
        self.sql("FLUSH BINARY LOGS")
        self.summary.flushes += 1


def run_mixed_workload(conn: Any, *, seed: int = 1, after_ddl: Callable[[], None] | None = None,
                       alter_mid_stream: bool = False) -> WorkloadSummary:
    """Run the workload on an autocommit pymysql connection; return what it did.

    Drops and recreates ``shop`` and ``ops``. Deterministic for a given ``seed`` (only the
    200-order transaction uses it). Sets the session's ``sql_mode=''`` (zero dates) and
    ``time_zone='+00:00'``. ``after_ddl`` is called once the tables exist, before any DML (to
    take a schema snapshot there). ``alter_mid_stream`` adds a column to ``shop.orders``
    after its first changes (``ALTER TABLE … ADD COLUMN note``) and changes orders again.
    """
    summary = WorkloadSummary(tables=list(WORKLOAD_TABLES))
    r = _Runner(conn, summary)
    r.sql("SET NAMES utf8mb4")
    r.sql("SET SESSION sql_mode = ''")
    r.sql("SET SESSION time_zone = '+00:00'")
    for schema in SCHEMAS:
        r.sql(f"DROP DATABASE IF EXISTS {schema}")
        r.sql(f"CREATE DATABASE {schema} CHARACTER SET utf8mb4")
    for ddl in _DDL.values():
        r.sql(ddl)
    if after_ddl is not None:
        after_ddl()

    _integers(r)
    _numbers(r)
    r.flush()
    _times(r)
    _texts(r)
    r.flush()
    _blobs(r)
    _orders(r, random.Random(seed))
    if alter_mid_stream:
        _alter_orders(r)
    r.flush()
    _ops(r)
    r.cur.close()
    return summary


def _integers(r: _Runner) -> None:
    t = "shop.ints"
    cols = "id, t, tu, s, su, m, mu, i, iu, b, bu"
    r.many(t, cols, [
        (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0),
        (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295,
         9223372036854775807, 18446744073709551615),
        (3, 0, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775808),
        (4, None, None, None, None, None, None, None, None, None, None),
        (5, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
    ])
    r.dml(t, "UPDATE", "UPDATE shop.ints SET tu = 254, bu = 18446744073709551614 WHERE id = 2")
    r.dml(t, "UPDATE", "UPDATE shop.ints SET t = t + 1 WHERE id IN (3, 5)")
    r.dml(t, "DELETE", "DELETE FROM shop.ints WHERE id = 5")


def _numbers(r: _Runner) -> None:
    t = "shop.nums"
    cols = "id, price, huge, f, d, bit1, bit64, y"
    r.many(t, cols, [
        (1, "-0.50", "-12345678901234567890123456789012345.123456789012345678901234567890",
         1.1, 0.1, 0, 0, 0),
        (2, "99999999.99", "0.000000000000000000000000000001", -3.4028234663852886e38, 1e100,
         1, 18446744073709551615, 2024),
        (3, "0.00", "99999999999999999999999999999999999.999999999999999999999999999999",
         1.5e-7, -2.2250738585072014e-308, 1, 0x8000000000000001, 1901),
        (4, None, None, None, None, None, None, None),
        (5, "12.30", "1", 0.0, 1.7976931348623157e308, 0, 5, 2155),
    ])
    r.dml(t, "UPDATE", "UPDATE shop.nums SET price = -price, y = 1999 WHERE id IN (2, 5)")
    r.dml(t, "UPDATE", "UPDATE shop.nums SET bit64 = b'1010', bit1 = b'1' WHERE id = 1")
    r.dml(t, "DELETE", "DELETE FROM shop.nums WHERE id = 3")


def _times(r: _Runner) -> None:
    t = "shop.times"
    cols = "id, d, t0, t6, dt0, dt3, dt6, ts6, ts0"
    r.many(t, cols, [
        (1, "0000-00-00", "-838:59:59", "-838:59:59.000000", "0000-00-00 00:00:00",
         "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00",
         "0000-00-00 00:00:00"),
        (2, "1000-01-01", "838:59:59", "-00:00:00.5", "1000-01-01 00:00:00",
         "1000-01-01 00:00:00.001", "1000-01-01 00:00:00.000001", "1970-01-01 00:00:01.000000",
         "1970-01-01 00:00:01"),
        (3, "9999-12-31", "00:00:00", "838:59:59.999999", "9999-12-31 23:59:59",
         "9999-12-31 23:59:59.999", "9999-12-31 23:59:59.999999", "2038-01-19 03:14:07.999999",
         "2038-01-19 03:14:07"),
        (4, None, None, None, None, None, None, None, None),
        (5, "2024-02-29", "-01:02:03", "12:34:56.000789", "2024-02-29 12:00:00",
         "2024-02-29 12:00:00.120", "2024-02-29 12:00:00.123456", "2024-06-01 12:34:56.5",
         "2024-06-01 12:34:56"),
        (6, "2024-00-00", "-00:00:01", "-12:00:00.010000", "2024-01-00 00:00:00",
         "2024-01-01 00:00:00.5", "2024-01-01 00:00:00.5", "1999-12-31 23:59:59.999999",
         "2000-01-01 00:00:00"),
    ])
    r.dml(t, "UPDATE", "UPDATE shop.times SET ts6 = '2001-09-09 01:46:40.25', t0 = '-00:00:59' "
                       "WHERE id = 5")
    r.dml(t, "DELETE", "DELETE FROM shop.times WHERE id = 6")


_EMOJI = "\U0001F600"  # 😀 (4 bytes in utf8mb4)
_LONG_UTF = ("héllo wörld " + _EMOJI + " ") * 20  # ~300 characters, > 255 bytes


def _texts(r: _Runner) -> None:
    t = "shop.texts"
    cols = "code, c_latin, v_latin, c_utf, v_utf, v500, txt, mtxt"
    r.many(t, cols, [
        ("a|b", "café", "naïve déjà vu", "ça va", "smile " + _EMOJI, _LONG_UTF,
         "line1\nline2\ttab 'quote' \"dq\" back\\slash", "short"),
        ("back\\slash", "x", "trailing  ", "  lead", "日本語テキスト", "", "", ""),
        ("pipe|and\\both", None, None, None, None, None, None, None),
        ("plain", "ÿ", "quote ' and \" and `", "€", "mixed é " + _EMOJI + " ü", "v",
         "x" * 300, "m" * 20000),
        ("ctrl", "a\tb", "nul\x00byte", "\r\n", "\x01\x1f", "%_%", "NULL", "'NULL'"),
    ])
    # Primary-key update.
    r.dml(t, "UPDATE", "UPDATE shop.texts SET code = 'a|b|renamed\\\\' , v_utf = 'moved' "
                       "WHERE code = 'a|b'")
    r.dml(t, "UPDATE", "UPDATE shop.texts SET mtxt = CONCAT(mtxt, 'tail'), c_latin = 'Ünï' "
                       "WHERE code = 'plain'")
    r.dml(t, "DELETE", "DELETE FROM shop.texts WHERE code = 'ctrl'")


def _blobs(r: _Runner) -> None:
    t = "shop.blobs"
    r.many(t, "id, blb, vb, b4, size, tags, doc", [
        (1, b"\x00\xff\x00abc\xfe", b"\xff\x00'\\\"\n\r\t\x1a", b"\x00\x01", "small", "",
         '{"a": 1, "b": [1, 2.5, "x\\u00e9"], "c": null}'),
        (2, b"", b"", b"\xff\xff\xff\xff", "large", "a,b,c,d", "[]"),
        (3, bytes(range(256)), b"\x00", b"ab", "medium", "a,c", '"str"'),
        (4, None, None, None, None, None, None),
        (5, b"\x00" * 10, b"x" * 64, b"\x00\x00\x00\x00", "", "d", '{"k": "v\\"q"}'),
    ])
    r.dml(t, "UPDATE", "UPDATE shop.blobs SET geo = ST_GeomFromText('POINT(1 2)') WHERE id = 1")
    r.dml(t, "UPDATE", "UPDATE shop.blobs SET geo = ST_GeomFromText('POINT(-1.5 1e10)'), "
                       "tags = 'b' WHERE id = 3")
    r.dml(t, "UPDATE", "UPDATE shop.blobs SET doc = JSON_SET(doc, '$.z', 3), blb = 0x00ff "
                       "WHERE id IN (1, 5)")
    r.dml(t, "DELETE", "DELETE FROM shop.blobs WHERE id = 2")


def _orders(r: _Runner, rnd: random.Random) -> None:
    """A 200-insert transaction, order lines, then updates and deletes across both tables."""
    customers = ["Zoë", "Ömer", "Ana|Lu", "back\\slash", "李", "Bob " + _EMOJI]
    r.sql("BEGIN")
    for n in range(1, 201):
        cents = rnd.randint(0, 10_000_000)
        r.dml("shop.orders", "INSERT",
              "INSERT INTO shop.orders (order_id, customer, total, status, placed_at, flags) "
              "VALUES (%s, %s, %s, %s, %s, %s)",
              (n, rnd.choice(customers), f"{cents // 100}.{cents % 100:02d}",
               rnd.choice(["new", "paid"]),
               f"2024-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d} "
               f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}"
               f".{rnd.randint(0, 999):03d}",
               rnd.choice(["", "gift", "gift,express", "express,fragile"])))
    r.sql("COMMIT")
    lines = []
    for order_id in range(1, 21):
        for line_no in range(1, rnd.randint(2, 4)):
            lines.append((line_no, f"SKU-{rnd.randint(1, 999):03d}", order_id,
                          rnd.randint(1, 9), None if line_no % 2 else "gift wrap"))
    r.many("shop.order_lines", "line_no, sku, order_id, qty, note", lines)
    r.dml("shop.orders", "UPDATE",
          "UPDATE shop.orders SET status = 'shipped' WHERE order_id <= 30 AND status <> 'shipped'")
    r.dml("shop.order_lines", "UPDATE",
          "UPDATE shop.order_lines SET line_no = line_no + 100 WHERE order_id = 1")  # PK update
    r.dml("shop.orders", "DELETE", "DELETE FROM shop.orders WHERE order_id > 190")
    r.dml("shop.order_lines", "DELETE", "DELETE FROM shop.order_lines WHERE order_id = 2")


def _alter_orders(r: _Runner) -> None:
    """A DDL mid-stream: orders gains a column, then changes with the new shape."""
    r.sql("ALTER TABLE shop.orders ADD COLUMN note VARCHAR(20) CHARACTER SET utf8mb4 NULL "
          "AFTER total")
    r.dml("shop.orders", "UPDATE",
          "UPDATE shop.orders SET note = 'late', status = 'cancelled' WHERE order_id BETWEEN 40 AND 44")
    r.dml("shop.orders", "INSERT",
          "INSERT INTO shop.orders (order_id, customer, total, note, status, placed_at, flags) "
          "VALUES (%s, %s, %s, %s, %s, %s, %s)",
          (18446744073709551615, "Max|U", "0.01", None, "new", "2024-12-31 23:59:59.999", "gift"))
    r.dml("shop.orders", "DELETE", "DELETE FROM shop.orders WHERE order_id = 45")


def _ops(r: _Runner) -> None:
    r.many("ops.events", "kind, payload, at", [
        ("created", '{"id": 1}', "2024-01-01 00:00:00.001"),
        ("paid", '{"amount": 12.50, "ccy": "EUR"}', "2024-01-02 00:00:00"),
        ("noop", None, None),
    ])
    r.dml("ops.events", "UPDATE", "UPDATE ops.events SET kind = 'refunded' WHERE id = 2")
    r.many("ops.heap", "k, v", [("a", 1), ("a", 1), ("b", None), (None, None)])
    r.dml("ops.heap", "UPDATE", "UPDATE ops.heap SET v = 2 WHERE k = 'b'")
    r.dml("ops.heap", "DELETE", "DELETE FROM ops.heap WHERE k = 'a' LIMIT 1")
    r.dml("ops.events", "DELETE", "DELETE FROM ops.events WHERE kind = 'noop'")
