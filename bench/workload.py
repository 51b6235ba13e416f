"""The benchmark's write workload: realistic mixed tables, written until the binlog is big.

:func:`fill_binlog` creates schema ``benchdb`` with four ~10-column tables (integers, VARCHAR,
CHAR, DATETIME(6), DECIMAL, TEXT, a composite string primary key) and runs transactions of
multi-row INSERTs (``executemany``, which pymysql sends as one ``INSERT … VALUES (…), (…)``),
range UPDATEs and range DELETEs until the current binlog file reaches ``target_bytes``, then
rotates it with ``FLUSH BINARY LOGS``. The data is pseudo-random from a fixed seed.

Every UPDATE changes every row it matches (a counter is incremented), so the affected-row
counts that :class:`Written` adds up equal the row changes in the binlog.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from dataclasses import dataclass, field
from decimal import Decimal

__all__ = ["Written", "fill_binlog", "fill_narrow_binlog", "fill_wide_binlog", "TABLES",
           "WORKLOADS"]

SCHEMA = "benchdb"
TABLES: dict[str, str] = {
    "customers": """
        CREATE TABLE benchdb.customers (
          id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
          email VARCHAR(128) NOT NULL,
          full_name VARCHAR(64) NOT NULL,
          country CHAR(2) NOT NULL,
          balance DECIMAL(14,4) NOT NULL,
          signup_at DATETIME(6) NOT NULL,
          last_login DATETIME(6) NULL,
          bio TEXT NULL,
          score INT NOT NULL,
          logins INT UNSIGNED NOT NULL DEFAULT 0
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    "orders": """
        CREATE TABLE benchdb.orders (
          id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
          customer_id INT UNSIGNED NOT NULL,
          status VARCHAR(16) NOT NULL,
          amount DECIMAL(12,2) NOT NULL,
          currency CHAR(3) NOT NULL,
          qty SMALLINT NOT NULL,
          created_at DATETIME(6) NOT NULL,
          updated_at DATETIME(6) NOT NULL,
          note VARCHAR(255) NULL,
          revision INT NOT NULL DEFAULT 0
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    "audit_log": """
        CREATE TABLE benchdb.audit_log (
          id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
          ts DATETIME(6) NOT NULL,
          actor_id INT NOT NULL,
          action VARCHAR(32) NOT NULL,
          target VARCHAR(64) NOT NULL,
          payload TEXT NOT NULL,
          ip VARCHAR(45) NULL,
          latency_ms INT UNSIGNED NOT NULL,
          bytes BIGINT NOT NULL,
          ok TINYINT NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    "inventory": """
        CREATE TABLE benchdb.inventory (
          warehouse SMALLINT UNSIGNED NOT NULL,
          sku VARCHAR(32) NOT NULL,
          name VARCHAR(100) NOT NULL,
          qty INT NOT NULL,
          price DECIMAL(10,2) NOT NULL,
          cost DECIMAL(12,4) NOT NULL,
          weight_g INT UNSIGNED NULL,
          updated_at DATETIME(6) NOT NULL,
          description TEXT NULL,
          version INT NOT NULL DEFAULT 0,
          PRIMARY KEY (warehouse, sku)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
}

_INSERT = {
    "customers": "INSERT INTO benchdb.customers (email, full_name, country, balance, signup_at, "
                 "last_login, bio, score) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
    "orders": "INSERT INTO benchdb.orders (customer_id, status, amount, currency, qty, created_at, "
              "updated_at, note) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
    "audit_log": "INSERT INTO benchdb.audit_log (ts, actor_id, action, target, payload, ip, "
                 "latency_ms, bytes, ok) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
    "inventory": "INSERT INTO benchdb.inventory (warehouse, sku, name, qty, price, cost, weight_g, "
                 "updated_at, description) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
}
# UPDATE … WHERE <key range>: every matched row changes (a counter goes up).
_UPDATE = {
    "customers": "UPDATE benchdb.customers SET logins = logins + 1, last_login = NOW(6), "
                 "balance = balance - 0.5 WHERE id BETWEEN %s AND %s",
    "orders": "UPDATE benchdb.orders SET revision = revision + 1, updated_at = NOW(6), "
              "status = ELT(1 + (id + revision) %% 4, 'paid', 'shipped', 'delivered', 'returned') "
              "WHERE id BETWEEN %s AND %s",
    "audit_log": "UPDATE benchdb.audit_log SET ok = 1 - ok, latency_ms = latency_ms + 1 "
                 "WHERE id BETWEEN %s AND %s",
    "inventory": "UPDATE benchdb.inventory SET version = version + 1, qty = qty - 1, "
                 "updated_at = NOW(6) WHERE warehouse = %s AND sku BETWEEN %s AND %s",
}
_DELETE = {
    "customers": "DELETE FROM benchdb.customers WHERE id BETWEEN %s AND %s",
    "orders": "DELETE FROM benchdb.orders WHERE id BETWEEN %s AND %s",
    "audit_log": "DELETE FROM benchdb.audit_log WHERE id BETWEEN %s AND %s",
    "inventory": "DELETE FROM benchdb.inventory WHERE warehouse = %s AND sku BETWEEN %s AND %s",
}

_WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
          "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
          "zulu café naïve straße 東京 ✓").split()
_STATUSES = ("new", "paid", "shipped", "delivered", "returned", "cancelled")
_ACTIONS = ("login", "logout", "view", "update_profile", "checkout", "refund", "search")
_COUNTRIES = ("US", "DE", "FR", "GB", "JP", "BR", "IN", "NL", "SE", "ES")
_CURRENCIES = ("USD", "EUR", "GBP", "JPY")
_EPOCH = dt.datetime(2024, 1, 1)


@dataclass
class Written:
    """What the workload wrote: affected rows per statement kind, transactions, statements."""

    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    transactions: int = 0
    statements: int = 0
    per_table: dict[str, int] = field(default_factory=dict)

    @property
    def row_changes(self) -> int:
        return self.inserts + self.updates + self.deletes


class _Gen:
    """Row values for each table from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def text(self, lo: int, hi: int) -> str:
        r = self.r
        return " ".join(r.choice(_WORDS) for _ in range(r.randint(lo, hi)))

    def when(self) -> dt.datetime:
        return _EPOCH + dt.timedelta(seconds=self.r.randint(0, 40_000_000),
                                     microseconds=self.r.randint(0, 999_999))

    def money(self, hi: int, places: int) -> Decimal:
        return Decimal(self.r.randint(0, hi * 10 ** places)).scaleb(-places)

    def customers(self) -> tuple:
        r = self.r
        user = "".join(r.choices(string.ascii_lowercase, k=r.randint(5, 12)))
        return (f"{user}@example.com", self.text(2, 3)[:64], r.choice(_COUNTRIES),
                self.money(99_999, 4), self.when(), self.when() if r.random() < 0.8 else None,
                self.text(5, 40) if r.random() < 0.7 else None, r.randint(-1000, 100_000))

    def orders(self) -> tuple:
        r = self.r
        created = self.when()
        return (r.randint(1, 50_000), r.choice(_STATUSES), self.money(9_999, 2),
                r.choice(_CURRENCIES), r.randint(1, 20), created, created,
                self.text(2, 12) if r.random() < 0.5 else None)

    def audit_log(self) -> tuple:
        r = self.r
        ip = f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
        return (self.when(), r.randint(1, 50_000), r.choice(_ACTIONS), self.text(1, 4)[:64],
                self.text(8, 50), ip if r.random() < 0.9 else None, r.randint(1, 5000),
                r.randint(0, 10 ** 9), r.randint(0, 1))

    def inventory(self, warehouse: int, n: int) -> tuple:
        r = self.r
        return (warehouse, f"SKU-{n:09d}", self.text(2, 6)[:100], r.randint(0, 10_000),
                self.money(9_999, 2), self.money(9_999, 4),
                r.randint(1, 50_000) if r.random() < 0.9 else None, self.when(),
                self.text(10, 60) if r.random() < 0.6 else None)


def _current_size(cur) -> tuple[str, int]:
    cur.execute("SHOW MASTER STATUS")
    name, pos = cur.fetchone()[:2]
    return str(name), int(pos)


def fill_binlog(conn, target_bytes: int, *, seed: int = 7, rows_per_insert: int = 200,
                progress=None) -> tuple[str, Written]:
    """Write until the current binlog file holds ``target_bytes``; rotate; return its name.

    ``conn`` is an autocommit pymysql connection with rights to create ``benchdb``;
    ``progress(bytes_so_far)`` is called after each round of four transactions (one per table).
    """
    gen, w = _Gen(seed), Written()
    r = gen.r
    next_id = {"customers": 1, "orders": 1, "audit_log": 1}
    sku_next = {1: 0, 2: 0, 3: 0}
    deleted_to = {"customers": 0, "orders": 0, "audit_log": 0}
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        for ddl in TABLES.values():
            cur.execute(ddl)
        name, size = _current_size(cur)

        def run(sql: str, args) -> int:
            n = cur.execute(sql, args)
            w.statements += 1
            return n

        while size < target_bytes:
            for table in ("customers", "orders", "audit_log", "inventory"):
                cur.execute("BEGIN")
                n_ins = rows_per_insert * r.randint(1, 3)
                for start in range(0, n_ins, rows_per_insert):
                    k = min(rows_per_insert, n_ins - start)
                    if table == "inventory":
                        wh = r.randint(1, 3)
                        rows = [gen.inventory(wh, sku_next[wh] + i) for i in range(k)]
                        sku_next[wh] += k
                    else:
                        rows = [getattr(gen, table)() for _ in range(k)]
                    cur.executemany(_INSERT[table], rows)
                    w.statements += 1
                    w.inserts += k
                    w.per_table[table] = w.per_table.get(table, 0) + k
                if table != "inventory":
                    next_id[table] += n_ins
                    lo = r.randint(max(deleted_to[table] + 1, next_id[table] - 3000),
                                   next_id[table] - 1)
                    w.updates += run(_UPDATE[table], (lo, lo + r.randint(20, 150)))
                else:
                    wh = r.randint(1, 3)
                    lo = r.randint(0, max(sku_next[wh] - 1, 0))
                    w.updates += run(_UPDATE[table], (wh, f"SKU-{lo:09d}",
                                                      f"SKU-{lo + r.randint(20, 150):09d}"))
                if r.random() < 0.5:  # retention: delete the oldest rows
                    if table != "inventory":
                        lo = deleted_to[table] + 1
                        hi = lo + r.randint(20, 120)
                        deleted_to[table] = hi
                        w.deletes += run(_DELETE[table], (lo, hi))
                    else:
                        wh = r.randint(1, 3)
                        lo = r.randint(0, max(sku_next[wh] - 1, 0))
                        w.deletes += run(_DELETE[table], (wh, f"SKU-{lo:09d}",
                                                          f"SKU-{lo + r.randint(5, 40):09d}"))
                cur.execute("COMMIT")
                w.transactions += 1
                name, size = _current_size(cur)
                if size >= target_bytes:
                    break
            if progress is not None:
                progress(size)
        cur.execute("FLUSH BINARY LOGS")
    return name, w


# -- the narrow workload: one 8-column table, ~140 bytes a row change -------------------------

NARROW_TABLE = """
    CREATE TABLE benchdb.payments (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
      account_id INT UNSIGNED NOT NULL,
      kind VARCHAR(16) NOT NULL,
      amount DECIMAL(12,2) NOT NULL,
      qty SMALLINT NOT NULL,
      created_at DATETIME(6) NOT NULL,
      updated_at DATETIME(6) NOT NULL,
      note VARCHAR(96) NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
_NARROW_INSERT = ("INSERT INTO benchdb.payments (account_id, kind, amount, qty, created_at, "
                  "updated_at, note) VALUES (%s, %s, %s, %s, %s, %s, %s)")
_NARROW_UPDATE = ("UPDATE benchdb.payments SET qty = qty + 1, updated_at = NOW(6) "
                  "WHERE id BETWEEN %s AND %s")
_NARROW_DELETE = "DELETE FROM benchdb.payments WHERE id BETWEEN %s AND %s"


def fill_narrow_binlog(conn, target_bytes: int, *, seed: int = 7, progress=None
                       ) -> tuple[str, Written]:
    """The shape of the narrow measured file: one 8-column table (integers, VARCHAR, DECIMAL,
    DATETIME(6), a nullable note) and, per transaction, 400 inserted rows, 200 updated and
    100 deleted: 4 row changes in 7 are UPDATEs' before/after pairs' halves, so ~1.3 row
    images per row change, ~140 bytes of binlog per row change (the issue's 147 MB held
    1.05 M row changes, 1.35 M images). Same contract as :func:`fill_binlog`."""
    gen, w = _Gen(seed), Written()
    r = gen.r
    next_id, deleted_to = 1, 0
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(NARROW_TABLE)
        name, size = _current_size(cur)
        while size < target_bytes:
            cur.execute("BEGIN")
            rows = []
            for _ in range(400):
                created = gen.when()
                rows.append((r.randint(1, 50_000), r.choice(_STATUSES), gen.money(9_999, 2),
                             r.randint(1, 20), created, created,
                             gen.text(1, 6)[:96] if r.random() < 0.7 else None))
            cur.executemany(_NARROW_INSERT, rows)
            w.inserts += len(rows)
            next_id += len(rows)
            lo = r.randint(max(deleted_to + 1, next_id - 2000), next_id - 200)
            w.updates += cur.execute(_NARROW_UPDATE, (lo, lo + 199))
            w.deletes += cur.execute(_NARROW_DELETE, (deleted_to + 1, deleted_to + 100))
            deleted_to += 100
            w.statements += 3
            cur.execute("COMMIT")
            w.transactions += 1
            name, size = _current_size(cur)
            if progress is not None:
                progress(size)
        cur.execute("FLUSH BINARY LOGS")
    w.per_table["payments"] = w.row_changes
    return name, w


# -- the wide workload: one table of DOUBLE, DECIMAL, DATETIME(6), growing text ---------------

WIDE_TABLE = """
    CREATE TABLE benchdb.events (
      id INT PRIMARY KEY, user_id INT, kind VARCHAR(32), amount DECIMAL(12,2),
      note VARCHAR(200), created DATETIME(6), flag TINYINT, score DOUBLE
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
_WIDE_INSERT = ("INSERT INTO benchdb.events (id, user_id, kind, amount, note, created, flag, "
                "score) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
_WIDE_UPDATE = ("UPDATE benchdb.events SET amount = amount + 1, note = CONCAT(note, 'x') "
                "WHERE id BETWEEN %s AND %s")
_WIDE_DELETE = "DELETE FROM benchdb.events WHERE id BETWEEN %s AND %s"


def fill_wide_binlog(conn, target_bytes: int, *, seed: int = 7, progress=None
                     ) -> tuple[str, Written]:
    """The wide file: one 8-column table (INT, VARCHAR, DECIMAL, DATETIME(6), TINYINT,
    DOUBLE, a VARCHAR(200) note that grows on UPDATE); rows inserted 1,000 per ``executemany``,
    then UPDATEs of 1,000-row ranges over half of them and DELETEs over a quarter, each
    statement its own transaction. The row count scales with ``target_bytes``: 147 MB asks for
    the issue's 600,000 rows and 1,050,000 row changes (~157 MB here: the notes' words are
    drawn, not the issue's). Same contract as :func:`fill_binlog`
    (the current file is rotated and named), except that the file may end a little past
    ``target_bytes``."""
    gen, w = _Gen(seed), Written()
    r = gen.r
    total = max(1000, round(target_bytes / 147e6 * 600) * 1000)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(WIDE_TABLE)
        for lo in range(1, total + 1, 1000):
            rows = [(i, r.randint(1, 50_000), r.choice(_ACTIONS), gen.money(99_999, 2),
                     gen.text(1, 7)[:180] if r.random() < 0.9 else None, gen.when(),
                     r.randint(-128, 127), r.uniform(-1e6, 1e6) if r.random() < 0.95 else None)
                    for i in range(lo, lo + 1000)]
            w.inserts += cur.executemany(_WIDE_INSERT, rows)
            w.statements += 1
            w.transactions += 1
            if progress is not None:
                progress(_current_size(cur)[1])
        for lo in range(1, total // 2 + 1, 1000):
            w.updates += cur.execute(_WIDE_UPDATE, (lo, lo + 999))
            w.statements += 1
            w.transactions += 1
        for lo in range(total // 2 + 1, total // 2 + total // 4 + 1, 1000):
            w.deletes += cur.execute(_WIDE_DELETE, (lo, lo + 999))
            w.statements += 1
            w.transactions += 1
        name, _ = _current_size(cur)
        cur.execute("FLUSH BINARY LOGS")
    w.per_table["events"] = w.row_changes
    return name, w


# The benchmarks' ``--workload`` choices.
WORKLOADS = {"mixed": fill_binlog, "narrow": fill_narrow_binlog, "wide": fill_wide_binlog}
