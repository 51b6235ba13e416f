"""A lake indexed from a real MariaDB for ``binlake mcp`` and ``binlake console`` tests
(issue 46): two tables, a schema snapshot, a first phase of changes, a moment, a second phase
with an ALTER, then ``binlake index``. The server's rows at the moment and at the end, its
DSN (with root's password, which no output may show) and the moment are kept.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from devtools.mariadb import MariaDBServer
from pipelines.cli.main import main

ORDERS = "mcp46.orders"
PHASE_1 = [
    "DROP DATABASE IF EXISTS mcp46", "CREATE DATABASE mcp46",
    "CREATE TABLE mcp46.orders (id INT PRIMARY KEY, status VARCHAR(20), amount INT)",
    "CREATE TABLE mcp46.notes (id INT PRIMARY KEY, body VARCHAR(200))",
]
PHASE_1_DML = [
    *(f"INSERT INTO mcp46.orders VALUES ({i}, 'new', {10 * i})" for i in range(1, 31)),
    "UPDATE mcp46.orders SET status = 'paid' WHERE id = 7",
    "INSERT INTO mcp46.notes VALUES (1, 'first'), (2, 'second')",
]
PHASE_2 = [
    "UPDATE mcp46.orders SET amount = 777 WHERE id = 7",
    "DELETE FROM mcp46.orders WHERE id IN (3, 4)",
    "ALTER TABLE mcp46.orders ADD COLUMN note VARCHAR(20)",
    "UPDATE mcp46.orders SET status = 'shipped', note = 'fast' WHERE id = 7",
    "UPDATE mcp46.notes SET body = 'changed' WHERE id = 2",
]


@dataclass
class AssistLake:
    lake: str
    dsn: str  # holds root's password: passed to the servers under test, never shown
    password: str
    moment: str  # UTC, between the phases
    orders_at_moment: list[tuple]
    orders_final: list[tuple]
    key7_final: tuple


def _rows(conn, sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def build_lake(tmp: Path) -> AssistLake:
    lake = str(tmp / "lake")
    binlogs = tmp / "binlogs"
    (tmp / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp / "server_tmp")}) as server:
        with server.connect() as conn:
            with conn.cursor() as cur:
                for s in PHASE_1:
                    cur.execute(s)
            assert main(["--lake", lake, "snapshot", "--source-dsn", server.dsn()]) == 0
            with conn.cursor() as cur:
                for s in PHASE_1_DML:
                    cur.execute(s)
            at_moment = _rows(conn, "SELECT id, status, amount FROM mcp46.orders ORDER BY id")
            moment = _rows(conn, "SELECT UTC_TIMESTAMP()")[0][0]
            time.sleep(1.2)  # binlog timestamps have whole seconds
            with conn.cursor() as cur:
                for s in PHASE_2:
                    cur.execute(s)
            final = _rows(conn, "SELECT id, status, amount, note FROM mcp46.orders ORDER BY id")
            server.copy_closed_binlogs(binlogs)
        dsn, password = server.dsn(), server._password
    assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0
    return AssistLake(lake, dsn, password, moment.strftime("%Y-%m-%d %H:%M:%S"), at_moment,
                      final, next(r for r in final if r[0] == 7))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """``python -m pipelines ARGS`` in the checkout, stderr and stdout to ``log``."""
    out = open(log, "wb")
    return subprocess.Popen([sys.executable, "-m", "pipelines", *args], env=env,
                            cwd=str(Path(__file__).resolve().parents[2]), stdout=out,
                            stderr=subprocess.STDOUT)


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Until ``url`` answers (any HTTP status), or fail with the server's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=60)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} not answering after {timeout} s: {log.read_text()[-3000:]}")
