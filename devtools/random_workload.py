"""A workload nobody chose: random tables and a random statement mix, from one seed.

:func:`random_tables` draws tables of random columns — every integer width signed and
unsigned, DECIMAL of random precision and scale, FLOAT, DOUBLE, BIT(1..64), YEAR, DATE,
TIME/DATETIME/TIMESTAMP of random fraction digits, CHAR/VARCHAR/BINARY/VARBINARY of random
widths on both sides of the 255-byte length-prefix switch, in latin1 and utf8mb4, the TEXT and
BLOB sizes, ENUM (1- and 2-byte), SET (1 to 8 bytes), JSON — each with its own NULL rate;
a primary key of one or two columns, or none. :func:`run_random_workload` then writes until
the server's binlogs hold ``target_bytes``: multi-row INSERTs of random sizes, UPDATEs that
set random columns (strings grown and shrunk, values set to NULL and back), DELETEs of random
ranges, in transactions of random length; ``row_images`` lets each statement draw its
session's ``binlog_row_image`` (FULL, NOBLOB, MINIMAL: partial images).

The seed decides everything: a failing run is re-run from the seed it printed. The returned
:class:`RandomSummary` counts the affected rows each statement reported (every UPDATE
changes its rows: it increments a counter column), an independent count of row changes.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import string
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Sequence

__all__ = ["Column", "RandomTable", "RandomSummary", "random_tables", "run_random_workload"]

SCHEMA = "fuzzdb"
_WORDS = ("alpha", "beta", "gamma", "delta", "épsilon", "zeta", "ηta", "theta", "iota",
          "kappa", "lambda", "mu", "emoji😀", "nu", "xi", "omicron", "pi", "rho", "sigma")


@dataclass
class Column:
    """One drawn column: its DDL type, NULL rate, and how values are drawn for it."""

    name: str
    ddl: str
    null_rate: float
    draw: Callable[[random.Random], object]
    grows: bool = False  # a string an UPDATE can lengthen with CONCAT
    limit: int = 0  # a string's length limit in characters (grows stay under it)
    width: int = 0  # bytes the column takes of the row's 65,535 (CHAR, VARCHAR, BINARY)


@dataclass
class RandomTable:
    name: str
    columns: list[Column]
    pk: list[str]  # [] = no primary key

    def create(self) -> str:
        cols = ["id BIGINT NOT NULL", "rev INT NOT NULL DEFAULT 0"]
        for c in self.columns:
            cols.append(f"`{c.name}` {c.ddl} {'NULL' if c.null_rate else 'NOT NULL'}")
        if self.pk:
            cols.append("PRIMARY KEY (" + ", ".join(f"`{k}`" for k in self.pk) + ")")
        return (f"CREATE TABLE {SCHEMA}.`{self.name}` ({', '.join(cols)}) "
                f"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")


@dataclass
class RandomSummary:
    seed: int
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    statements: int = 0
    transactions: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    ddl: dict[str, str] = field(default_factory=dict)  # schema.table -> its CREATE TABLE

    @property
    def row_changes(self) -> int:
        return self.inserts + self.updates + self.deletes

    @property
    def tables(self) -> list[str]:
        return [f"{SCHEMA}.{t}" for t in self.per_table]


def _text(r: random.Random, n: int, ascii_only: bool) -> str:
    if ascii_only:
        return "".join(r.choices(string.ascii_letters + string.digits + " '\\|", k=n))
    out = ""
    while len(out) < n:
        out += r.choice(_WORDS) + " "
    return out[:n]


def _column(r: random.Random, i: int) -> Column:
    """One column of a random type; its NULL rate is 0 (NOT NULL) a third of the time."""
    null_rate = 0.0 if r.random() < 0.33 else r.choice([0.02, 0.1, 0.3, 0.6, 0.95])
    name = f"c{i}"
    kind = r.choice(["int", "int", "decimal", "float", "double", "bit", "year", "date", "time",
                     "datetime", "timestamp", "char", "varchar", "varchar", "binary",
                     "varbinary", "text", "blob", "enum", "set", "json"])
    if kind == "int":
        width, lo, hi = r.choice([("TINYINT", -128, 127), ("SMALLINT", -2**15, 2**15 - 1),
                                  ("MEDIUMINT", -2**23, 2**23 - 1), ("INT", -2**31, 2**31 - 1),
                                  ("BIGINT", -2**63, 2**63 - 1)])
        if r.random() < 0.5:
            return Column(name, f"{width} UNSIGNED", null_rate, lambda g, s=hi - lo: g.choice(
                [0, s, g.randint(0, s)]))
        return Column(name, width, null_rate,
                      lambda g, a=lo, b=hi: g.choice([a, b, 0, -1, g.randint(a, b)]))
    if kind == "decimal":
        p = r.randint(1, 65)
        s = r.randint(0, min(p, 30))
        whole = p - s

        def dec(g, whole=whole, s=s):
            digits = "".join(g.choices(string.digits, k=whole)) or "0"
            frac = "".join(g.choices(string.digits, k=s))
            sign = "-" if g.random() < 0.4 else ""
            return Decimal(f"{sign}{digits}.{frac}" if s else f"{sign}{digits}")
        return Column(name, f"DECIMAL({p},{s})", null_rate, dec)
    if kind == "float":
        return Column(name, "FLOAT", null_rate, lambda g: g.choice(
            [0.0, -1.5, 3.4e38, -1.17e-38, g.uniform(-1e6, 1e6), float(g.randint(-9, 9))]))
    if kind == "double":
        return Column(name, "DOUBLE", null_rate, lambda g: g.choice(
            [0.0, -0.1, 1e300, -2.2250738585072014e-308, g.uniform(-1e12, 1e12),
             g.random() * 10 ** g.randint(-30, 30)]))
    if kind == "bit":
        n = r.randint(1, 64)
        return Column(name, f"BIT({n})", null_rate, lambda g, n=n: g.randint(0, 2**n - 1))
    if kind == "year":
        return Column(name, "YEAR", null_rate, lambda g: g.choice([1901, 2155, g.randint(
            1901, 2155)]))
    if kind == "date":
        return Column(name, "DATE", null_rate, lambda g: dt.date(1000, 1, 1) + dt.timedelta(
            days=g.randint(0, 3_000_000)))
    if kind in ("time", "datetime", "timestamp"):
        fsp = r.randint(0, 6)
        ddl = f"{kind.upper()}({fsp})"

        def frac(g, fsp=fsp) -> int:
            return g.randint(0, 10 ** fsp - 1) * 10 ** (6 - fsp) if fsp else 0
        if kind == "time":
            def tm(g, frac=frac):
                secs = g.randint(-838 * 3600 + 1, 838 * 3600 - 1)
                sign = "-" if secs < 0 else ""
                secs = abs(secs)
                return (f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
                        f".{frac(g):06d}")
            return Column(name, ddl, null_rate, tm)
        if kind == "datetime":
            return Column(name, ddl, null_rate, lambda g, frac=frac: dt.datetime(
                1000, 1, 1) + dt.timedelta(seconds=g.randint(0, 280_000_000_000),
                                           microseconds=frac(g)))
        return Column(name, ddl, null_rate,
                      lambda g, frac=frac: dt.datetime(1970, 1, 2) + dt.timedelta(
                          seconds=g.randint(0, 2_147_000_000), microseconds=frac(g)))
    if kind in ("char", "varchar"):
        charset = r.choice(["latin1", "utf8mb4"])
        n = r.randint(1, 255) if kind == "char" else r.choice(
            [r.randint(1, 63), r.randint(64, 255), r.randint(256, 3000)])
        ascii_only = charset == "latin1"
        ddl = f"{kind.upper()}({n}) CHARACTER SET {charset}"
        return Column(name, ddl, null_rate, lambda g, n=n, a=ascii_only: _text(
            g, g.randint(0, n), a).rstrip() if g.random() < 0.9 else "", grows=True, limit=n,
            width=n * (1 if ascii_only else 4))
    if kind in ("binary", "varbinary"):
        n = r.randint(1, 255) if kind == "binary" else r.randint(1, 700)
        return Column(name, f"{kind.upper()}({n})", null_rate,
                      lambda g, n=n, k=kind: bytes(g.randint(0, 255) for _ in range(
                          n if k == "binary" and g.random() < 0.5 else g.randint(0, n))),
                      width=n)
    if kind == "text":
        ddl, n = r.choice([("TINYTEXT", 60), ("TEXT", 2000), ("MEDIUMTEXT", 5000),
                           ("LONGTEXT", 9000)])
        # TINYTEXT holds 255 bytes: 60 characters of up to 4 bytes
        return Column(name, ddl, null_rate, lambda g, n=n: _text(g, g.randint(0, n), False),
                      grows=True, limit=n)
    if kind == "blob":
        ddl, n = r.choice([("TINYBLOB", 255), ("BLOB", 3000), ("MEDIUMBLOB", 20000),
                           ("LONGBLOB", 40000)])
        return Column(name, ddl, null_rate, lambda g, n=n: g.randbytes(g.randint(0, n)))
    if kind == "enum":
        n = r.choice([r.randint(1, 20), r.randint(256, 400)])
        labels = [f"e{k}" for k in range(n)]
        ddl = "ENUM(" + ", ".join(f"'{x}'" for x in labels) + ")"
        return Column(name, ddl, null_rate, lambda g, labels=labels: g.choice(labels))
    if kind == "set":
        n = r.randint(1, 64)
        labels = [f"s{k}" for k in range(n)]
        ddl = "SET(" + ", ".join(f"'{x}'" for x in labels) + ")"
        return Column(name, ddl, null_rate, lambda g, labels=labels: ",".join(
            x for x in labels if g.random() < 0.3))
    return Column(name, "JSON", null_rate, lambda g: json.dumps(g.choice([
        {"a": g.randint(-5, 5), "b": [1, 2.5, None, True], "c": _text(g, 8, True)},
        [g.random(), "x", {"k": None}], g.randint(-10**12, 10**12), "plain", None])))


def random_tables(r: random.Random, count: int | None = None) -> list[RandomTable]:
    """``count`` (1-4 when None) tables of 1-24 random columns after ``id`` and ``rev``."""
    tables = []
    for t in range(count or r.randint(1, 4)):
        cols, width = [], 0
        for i in range(r.randint(1, 24)):
            c = _column(r, i)
            while width + c.width > 50_000:  # a row holds 65,535 bytes of such columns
                c = _column(r, i)
            cols.append(c)
            width += c.width
        # a key of id alone; one declared out of column order that every UPDATE changes
        # (rev is incremented); or none (rows fold as multisets)
        pk = r.choice([["id"], ["id"], ["rev", "id"], []])
        tables.append(RandomTable(f"t{t}", cols, pk))
    return tables


def _value(r: random.Random, c: Column):
    return None if c.null_rate and r.random() < c.null_rate else c.draw(r)


def _size(cur) -> int:
    cur.execute("SHOW BINARY LOGS")
    return sum(int(row[1]) for row in cur.fetchall())


def run_random_workload(conn, target_bytes: int, *, seed: int,
                        row_images: Sequence[str] = ("FULL",), tables: int | None = None
                        ) -> RandomSummary:
    """Create ``fuzzdb`` with random tables and write until the binlogs hold
    ``target_bytes``; see the module docstring. ``conn``: an autocommit pymysql connection."""
    r = random.Random(seed)
    summary = RandomSummary(seed)
    drawn = random_tables(r, tables)
    next_id = {t.name: 1 for t in drawn}
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'")
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        for t in drawn:
            cur.execute(t.create())
            summary.per_table[t.name] = 0
            summary.ddl[f"{SCHEMA}.{t.name}"] = t.create()
        start = _size(cur)
        while _size(cur) - start < target_bytes:
            cur.execute("BEGIN")
            for _ in range(r.choice([1, 1, 2, 5, 20])):
                t = r.choice(drawn)
                cur.execute(f"SET SESSION binlog_row_image = '{r.choice(list(row_images))}'")
                n = _statement(cur, r, t, next_id)
                summary.per_table[t.name] += n[1]
                setattr(summary, n[0], getattr(summary, n[0]) + n[1])
                summary.statements += 1
            cur.execute("COMMIT")
            summary.transactions += 1
        cur.execute("SET SESSION binlog_row_image = 'FULL'")
    return summary


def _q(name: str) -> str:
    return f"{SCHEMA}.`{name}`"


def _statement(cur, r: random.Random, t: RandomTable, next_id: dict) -> tuple[str, int]:
    """One random INSERT, UPDATE or DELETE on ``t``: (kind, affected rows)."""
    top = next_id[t.name]
    kind = r.choice(["insert"] * 5 + ["update"] * 3 + ["delete"]) if top > 1 else "insert"
    names = ["id", "rev"] + [c.name for c in t.columns]
    if kind == "insert":
        n = r.choice([1, r.randint(2, 40), r.randint(41, 600)])
        rows = [[top + k, 0] + [_value(r, c) for c in t.columns] for k in range(n)]
        next_id[t.name] = top + n
        cur.executemany(f"INSERT INTO {_q(t.name)} ({', '.join(f'`{x}`' for x in names)}) "
                        f"VALUES ({', '.join(['%s'] * len(names))})", rows)
        return "inserts", n
    lo = r.randint(1, top - 1)
    hi = lo + r.choice([0, r.randint(1, 30), r.randint(31, 500)])
    if kind == "delete":
        return "deletes", cur.execute(f"DELETE FROM {_q(t.name)} WHERE id BETWEEN %s AND %s",
                                      (lo, hi))
    sets, args = ["rev = rev + 1"], []
    for c in r.sample(t.columns, r.randint(0, len(t.columns))):
        choice = r.random()
        if c.grows and choice < 0.4:
            sets.append(f"`{c.name}` = LEFT(CONCAT(COALESCE(`{c.name}`, ''), %s), {c.limit})")
            args.append(_text(r, r.randint(1, 40), "latin1" in c.ddl).rstrip() + "z")
        elif c.null_rate and choice < 0.6:
            sets.append(f"`{c.name}` = NULL")
        else:
            v = c.draw(r)
            sets.append(f"`{c.name}` = %s")
            args.append(v)
    return "updates", cur.execute(
        f"UPDATE {_q(t.name)} SET {', '.join(sets)} WHERE id BETWEEN %s AND %s",
        (*args, lo, hi))
