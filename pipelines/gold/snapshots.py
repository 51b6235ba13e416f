"""Gold's ``schema_snapshots``: silver's snapshots under bintrail's integer ids.

bintrail reads ``snapshot_id`` and ``binlog_events.schema_version`` as integers: its
``recover`` resolves a table's columns from ``COALESCE(MAX(snapshot_id), 0)`` of this table
(``internal/metadata``, ``NewResolver``, scanned into an ``int``) and its ``query`` scans
``schema_version`` into a ``uint32``. Silver's snapshot ids are text
(``20261203T081822Z-20ed40c6``), so gold numbers them: each silver snapshot gets the next
integer the first time it is copied (in snapshot-time order), kept in ``snapshot_id``; the
silver id stays in ``binlake_snapshot_id``; a row's ``schema_version`` is its snapshot's
number, 0 when silver named it from the binlog's own metadata (``binlog``) — bintrail's 0,
"no snapshot". The numbers belong to the gold database (a database filled again from scratch
numbers afresh), like bintrail's own.

:func:`migrate` turns a gold database made before (text ``snapshot_id`` and
``schema_version``) into this form in place; idempotent, run by ``binlake init``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping

from pipelines.gold.ddl import EVENTS_TABLE, SNAPSHOTS_TABLE
from pipelines.vocabulary import quote_ident

__all__ = ["CREATE_SNAPSHOTS", "SNAPSHOT_COLUMNS", "numbers", "number_new", "copy_snapshots",
           "migrate"]

_T = quote_ident(SNAPSHOTS_TABLE)
_EPOCH = dt.datetime(1970, 1, 1)

# bintrail's schema_snapshots (its columns, types and indexes) plus binlake_snapshot_id
# (silver's id) and source_id, and a unique key so copying silver's snapshots is idempotent.
CREATE_SNAPSHOTS = f"""CREATE TABLE IF NOT EXISTS {_T} (
    id                  INT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
    snapshot_id         INT UNSIGNED NOT NULL COMMENT 'gold number of binlake_snapshot_id (binlog_events.schema_version)',
    binlake_snapshot_id VARCHAR(64)  NOT NULL DEFAULT '' COMMENT 'silver snapshot id',
    snapshot_time       DATETIME     NOT NULL,
    source_id           VARCHAR(64)  NOT NULL DEFAULT 'default',
    schema_name         VARCHAR(64)  NOT NULL,
    table_name          VARCHAR(64)  NOT NULL,
    column_name         VARCHAR(64)  NOT NULL,
    ordinal_position    INT UNSIGNED NOT NULL,
    column_key          VARCHAR(3)   NOT NULL COMMENT 'PRI, UNI, MUL, or empty',
    data_type           VARCHAR(64)  NOT NULL,
    column_type         TEXT         DEFAULT NULL,
    is_nullable         VARCHAR(3)   NOT NULL,
    column_default      TEXT         DEFAULT NULL,
    is_generated        TINYINT(1)   NOT NULL DEFAULT 0,
    pg_type_oid         INT UNSIGNED DEFAULT NULL,
    pg_type_mod         INT          DEFAULT NULL,
    UNIQUE KEY uq_snapshot_column (source_id, binlake_snapshot_id, schema_name, table_name, column_name),
    INDEX idx_snapshot_id    (snapshot_id),
    INDEX idx_snapshot_table (snapshot_id, schema_name, table_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

# Silver's columns copied (snapshot_id there is binlake_snapshot_id here).
SNAPSHOT_COLUMNS = ("snapshot_id", "snapshot_time", "source_id", "schema_name", "table_name",
                    "column_name", "ordinal_position", "column_key", "data_type", "column_type",
                    "is_nullable", "column_default", "is_generated")
_GOLD_COLUMNS = ("snapshot_id", "binlake_snapshot_id") + SNAPSHOT_COLUMNS[1:]


def numbers(conn) -> dict[str, int]:
    """Silver snapshot id → its gold number, for every snapshot gold holds."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT DISTINCT binlake_snapshot_id, snapshot_id FROM {_T}")
        return {str(b): int(n) for b, n in cur.fetchall()}


def number_new(have: Mapping[str, int], snapshots: Iterable[tuple[str, Any]]) -> dict[str, int]:
    """Pure: ``have`` plus a number for each silver snapshot id it lacks, after the highest,
    in ``(snapshot_time, id)`` order. ``snapshots``: (silver id, snapshot_time) pairs."""
    out = dict(have)
    first = {}
    for sid, when in snapshots:
        if sid not in out:
            first[sid] = min(first.get(sid, when), when)
    for sid in sorted(first, key=lambda s: (first[s], s)):
        out[sid] = max(out.values(), default=0) + 1
    return out


def _yes_no(v: Any) -> str:
    if isinstance(v, bool):
        return "YES" if v else "NO"
    return str(v) if v is not None else "NO"


def copy_snapshots(conn, rows: list[Mapping[str, Any]]) -> tuple[int, dict[str, int]]:
    """Copy silver's snapshot rows (``SNAPSHOT_COLUMNS``; ``snapshot_time`` in epoch
    seconds) into gold's, numbering new snapshots; existing rows are no-ops. Returns the
    rows inserted and every snapshot's number. Commits on ``conn``; callers hold the gold
    lock (one numbering at a time)."""
    when = {}
    for r in rows:
        when[str(r["snapshot_id"])] = int(r["snapshot_time"] or 0)
    have = numbers(conn)
    nums = number_new(have, when.items())
    values = []
    for r in rows:
        sid = str(r["snapshot_id"])
        values.append((nums[sid], sid, _EPOCH + dt.timedelta(seconds=when[sid]),
                       r["source_id"] or "default", r["schema_name"], r["table_name"],
                       r["column_name"], int(r["ordinal_position"] or 0), r["column_key"] or "",
                       r["data_type"] or "", r["column_type"], _yes_no(r["is_nullable"]),
                       r["column_default"],
                       1 if r["is_generated"] in (True, 1, "1", "YES") else 0))
    if not values:
        return 0, nums
    cols = ", ".join(quote_ident(c) for c in _GOLD_COLUMNS)
    marks = ", ".join(["%s"] * len(_GOLD_COLUMNS))
    inserted = 0
    with conn.cursor() as cur:
        for i in range(0, len(values), 1000):
            inserted += cur.executemany(
                f"INSERT INTO {_T} ({cols}) VALUES ({marks}) ON DUPLICATE KEY UPDATE id = id",
                values[i:i + 1000]) or 0
    conn.commit()
    return inserted, nums


def _column_type(cur, database: str, table: str, column: str) -> str | None:
    cur.execute("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s AND COLUMN_NAME = %s", (database, table, column))
    row = cur.fetchone()
    return str(row[0]).lower() if row else None


def migrate(conn, database: str) -> list[str]:
    """A gold database made before integer snapshot ids, changed in place (idempotent; each
    step only when ``information_schema`` shows it is still to do). Returns the steps run.

    1. ``schema_snapshots``: the text ids move to ``binlake_snapshot_id``, each snapshot is
       numbered (snapshot-time order), ``snapshot_id`` becomes ``INT UNSIGNED`` and the
       unique key names ``binlake_snapshot_id``.
    2. ``binlog_events.schema_version``: each row's text becomes its snapshot's number (0
       for ``binlog`` and ids gold has no snapshot of); ``ddl.match_bintrail_types`` then
       makes the column ``INT UNSIGNED``.
    """
    done = []
    ev = quote_ident(EVENTS_TABLE)
    with conn.cursor() as cur:
        if _column_type(cur, database, SNAPSHOTS_TABLE, "binlake_snapshot_id") is None:
            cur.execute(f"ALTER TABLE {_T} ADD COLUMN binlake_snapshot_id VARCHAR(64) NOT NULL "
                        "DEFAULT '' COMMENT 'silver snapshot id' AFTER snapshot_id")
            done.append("schema_snapshots.binlake_snapshot_id added")
        if _column_type(cur, database, SNAPSHOTS_TABLE, "snapshot_id") != "int":
            cur.execute(f"UPDATE {_T} SET binlake_snapshot_id = snapshot_id "
                        "WHERE binlake_snapshot_id = ''")
            cur.execute(f"SELECT binlake_snapshot_id, MIN(snapshot_time) FROM {_T} "
                        "GROUP BY binlake_snapshot_id")
            nums = number_new({}, [(str(s), t) for s, t in cur.fetchall()])
            for sid, n in nums.items():
                cur.execute(f"UPDATE {_T} SET snapshot_id = %s WHERE binlake_snapshot_id = %s",
                            (str(n), sid))
            cur.execute(f"ALTER TABLE {_T} MODIFY snapshot_id INT UNSIGNED NOT NULL COMMENT "
                        "'gold number of binlake_snapshot_id (binlog_events.schema_version)', "
                        "DROP INDEX uq_snapshot_column, ADD UNIQUE KEY uq_snapshot_column "
                        "(source_id, binlake_snapshot_id, schema_name, table_name, column_name)")
            done.append(f"schema_snapshots.snapshot_id numbered ({len(nums)} snapshots)")
        if _column_type(cur, database, EVENTS_TABLE, "schema_version") not in (None, "int"):
            cur.execute(f"UPDATE {ev} e LEFT JOIN (SELECT DISTINCT binlake_snapshot_id, "
                        f"snapshot_id FROM {_T}) s ON s.binlake_snapshot_id = e.schema_version "
                        "SET e.schema_version = COALESCE(s.snapshot_id, IF(e.schema_version "
                        "REGEXP '^[0-9]+$', e.schema_version, 0))")  # a re-run: numbered
            done.append("binlog_events.schema_version numbered")
    conn.commit()
    return done
