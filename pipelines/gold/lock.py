"""One export per gold database: the server's ``GET_LOCK``, whatever lake it comes from.

Gold's state lives in MySQL, so ``binlake gold`` into one gold database is serialised by the
server's lock (released by the server when the holder's connection dies, so a killed exporter
never blocks it), with the holder described in ``binlake_lease`` for the next one to name.
The lake's own stages are serialised by leases on the lake (``pipelines/lake/lease.py``); see
``docs/concurrency.md``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import socket
import sys
from typing import Iterator

from pipelines.config import Config
from pipelines.errors import LeaseHeldError
from pipelines.gold.client import connect, database_of, resolve_dsn
from pipelines.lake.check import check_tables
from pipelines.lake.lease import redact_command
from pipelines.vocabulary import quote_ident

__all__ = ["gold_lock", "holds_gold_lock"]


def holds_gold_lock(fn):
    """Decorator for ``run_gold(spark, cfg, *, gold_dsn=None)``: run it under
    :func:`gold_lock` on the gold database it exports to."""

    @functools.wraps(fn)
    def run(spark, cfg: Config, *args, **kwargs):
        with gold_lock(cfg, resolve_dsn(cfg, kwargs.get("gold_dsn"))):
            check_tables(cfg, "gold")
            return fn(spark, cfg, *args, **kwargs)

    return run


@contextlib.contextmanager
def gold_lock(cfg: Config, dsn, command: str | None = None) -> Iterator[None]:
    """Hold the gold database's export lock (``GET_LOCK``) for the block.

    One export per gold database at a time, whatever lake it comes from. The server frees the
    lock when the holding connection ends, so a killed exporter never blocks it. Waits up to
    ``lease.wait_seconds``, then raises :class:`LeaseHeldError` naming the holder.
    """
    db = database_of(dsn)
    name = f"binlake_gold.{db}"[:64]
    conn = connect(dsn, database=False, autocommit=True)
    me = {"host": socket.gethostname(), "pid": os.getpid(),
          "command": command or redact_command(),
          "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 0)", (name,))
            got = cur.fetchone()[0] == 1
            if not got:
                who = _gold_holder(cur, db)
                print(f"binlake: gold database {db} is being exported by {who}; waiting up "
                      f"to {cfg.lease.wait_seconds}s", file=sys.stderr, flush=True)
                cur.execute("SELECT GET_LOCK(%s, %s)", (name, cfg.lease.wait_seconds))
                if cur.fetchone()[0] != 1:
                    raise LeaseHeldError(
                        f"gold database {db} at {dsn.host}:{dsn.port} is being exported by "
                        f"{_gold_holder(cur, db)}; gave up after {cfg.lease.wait_seconds}s "
                        "(--wait / lease.wait_seconds)")
            _note_gold_holder(cur, db, me)
        yield
    finally:
        conn.close()  # frees the lock


def _gold_holder(cur, db: str) -> str:
    try:
        cur.execute(f"SELECT host, pid, command, since FROM {quote_ident(db)}.binlake_lease "
                    "WHERE name = 'gold'")
        row = cur.fetchone()
    except Exception:  # noqa: BLE001 - the table may not exist yet
        row = None
    if not row:
        return "another connection"
    return f"host {row[0]} pid {row[1]} ({row[2]!r}) since {row[3]}"


def _note_gold_holder(cur, db: str, me: dict) -> None:
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_ident(db)}")
    cur.execute(f"CREATE TABLE IF NOT EXISTS {quote_ident(db)}.binlake_lease ("
                "name VARCHAR(64) PRIMARY KEY, host VARCHAR(255), pid INT, "
                "command VARCHAR(1024), since VARCHAR(40))")
    cur.execute(f"REPLACE INTO {quote_ident(db)}.binlake_lease VALUES ('gold', %s, %s, %s, %s)",
                (me["host"], me["pid"], me["command"][:1024], me["since"]))
