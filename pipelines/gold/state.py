"""The export watermark in gold's own ``binlake_export_state`` table.

It lives next to the data it describes: a gold database restored from an older backup, or
dropped and re-created, carries its own (older or absent) watermark, and the next export
fills it back up. The watermark is the silver Delta version whose rows are all in gold; it
only moves after every task of a run finished, in one UPDATE. A crash before that leaves it
where it was and the next run writes the same rows again — as no-ops on the unique key.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pipelines.gold.ddl import STATE_TABLE, utc_now
from pipelines.vocabulary import quote_ident

__all__ = ["EXPORT_NAME", "ExportState", "load_state", "mark_running", "mark_done",
           "mark_failed", "set_rotated_before"]

EXPORT_NAME = "silver.binlog_events"
_T = quote_ident(STATE_TABLE)


@dataclass
class ExportState:
    export_name: str = EXPORT_NAME
    silver_table_id: str | None = None
    silver_path: str | None = None
    silver_version: int = -1
    target_version: int | None = None
    status: str = "never"
    last_rows_read: int = 0
    last_rows_inserted: int = 0
    last_pk_marked: int = 0
    last_method: str | None = None
    rotated_before: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    error: str | None = None


def _ensure_row(cur, name: str) -> None:
    cur.execute(f"INSERT INTO {_T} (export_name) VALUES (%s) "
                "ON DUPLICATE KEY UPDATE export_name = export_name", (name,))


def load_state(conn, name: str = EXPORT_NAME) -> ExportState:
    """The state row (a fresh one when there is none)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT export_name, silver_table_id, silver_path, silver_version, "
                    f"target_version, status, last_rows_read, last_rows_inserted, "
                    f"last_pk_marked, last_method, rotated_before, started_at, finished_at, "
                    f"error FROM {_T} WHERE export_name = %s", (name,))
        row = cur.fetchone()
    if row is None:
        return ExportState(export_name=name)
    return ExportState(*row)


def mark_running(conn, *, table_id: str | None, path: str, target: int,
                 name: str = EXPORT_NAME) -> None:
    with conn.cursor() as cur:
        _ensure_row(cur, name)
        cur.execute(f"UPDATE {_T} SET status = 'running', target_version = %s, "
                    "started_at = %s, finished_at = NULL, error = NULL, silver_path = %s "
                    "WHERE export_name = %s", (target, utc_now(), path, name))
    conn.commit()


def mark_done(conn, *, table_id: str | None, version: int, rows_read: int, inserted: int,
              pk_marked: int, method: str, name: str = EXPORT_NAME) -> None:
    """Advance the watermark to ``version`` (the one statement that commits a run)."""
    with conn.cursor() as cur:
        _ensure_row(cur, name)
        cur.execute(f"UPDATE {_T} SET silver_version = %s, silver_table_id = %s, "
                    "target_version = NULL, status = 'completed', last_rows_read = %s, "
                    "last_rows_inserted = %s, last_pk_marked = %s, last_method = %s, "
                    "finished_at = %s, error = NULL WHERE export_name = %s",
                    (version, table_id, rows_read, inserted, pk_marked, method, utc_now(),
                     name))
    conn.commit()


def mark_failed(conn, error: str, name: str = EXPORT_NAME) -> None:
    with conn.cursor() as cur:
        _ensure_row(cur, name)
        cur.execute(f"UPDATE {_T} SET status = 'failed', finished_at = %s, error = %s "
                    "WHERE export_name = %s", (utc_now(), error[:4000], name))
    conn.commit()


def set_rotated_before(conn, when: dt.datetime, name: str = EXPORT_NAME) -> None:
    """Record that rows older than ``when`` were rotated away (only ever moves forward)."""
    with conn.cursor() as cur:
        _ensure_row(cur, name)
        cur.execute(f"UPDATE {_T} SET rotated_before = GREATEST(COALESCE(rotated_before, %s), "
                    "%s) WHERE export_name = %s", (when, when, name))
    conn.commit()
