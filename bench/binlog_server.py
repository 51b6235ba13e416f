"""A throwaway MariaDB server for the benchmarks: writes the workload, hands back its binlog.

Minimal on purpose (``bench/`` does not import ``tests/``): ``mariadb-install-db`` into a
temporary directory, ``mariadbd`` on a unix socket only (``skip-networking``, root without a
password: no credential exists to leak), ROW binlogs with FULL row metadata, ``max_binlog_size``
1 GiB so one file holds the whole workload.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pymysql

__all__ = ["write_binlog"]

_BASENAME = "mariadb-bin"


def _which(*names: str) -> str:
    for name in names:
        path = shutil.which(name) or (name if Path(name).is_file() else None)
        if path:
            return path
    raise SystemExit(f"{names[0]} not found: install MariaDB (`make mariadb`)")


def _connect(sock: Path) -> pymysql.connections.Connection:
    return pymysql.connect(unix_socket=str(sock), user="root", password="", autocommit=True,
                           connect_timeout=5)


def write_binlog(target_bytes: int, out_dir: Path, fill) -> tuple[Path, int]:
    """Run ``fill(conn, target_bytes)`` (``workload.fill_binlog``) on a fresh server; copy the
    binlog file it names into ``out_dir``; return (path, row changes written)."""
    work = Path(tempfile.mkdtemp(prefix="binlake-bench-mariadb-"))
    data, sock = work / "data", work / "mysqld.sock"
    proc = None
    try:
        subprocess.run([_which("mariadb-install-db", "/usr/bin/mariadb-install-db"),
                        "--no-defaults", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=True)
        proc = subprocess.Popen(
            [_which("mariadbd", "/usr/sbin/mariadbd"), "--no-defaults", f"--datadir={data}",
             f"--socket={sock}", "--skip-networking", "--user=root",
             f"--log-bin={data / _BASENAME}", "--binlog-format=ROW",
             "--binlog-row-metadata=FULL", "--max-binlog-size=1073741824", "--server-id=1",
             "--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0",
             f"--log-error={work / 'error.log'}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = _connect(sock)
                break
            except pymysql.err.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("mariadbd did not start: see " + str(work / "error.log"))
                time.sleep(0.05)
        try:
            name, written = fill(conn, target_bytes)
        finally:
            conn.close()
        out_dir.mkdir(parents=True, exist_ok=True)
        dest = out_dir / name
        shutil.copyfile(data / name, dest)
        return dest, written.row_changes
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(work, ignore_errors=True)
