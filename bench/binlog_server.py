"""A throwaway MariaDB server for the benchmarks: writes the workload, hands back its binlog.

The server is ``devtools.mariadb.MariaDBServer`` (loopback only, root's generated password never
printed), with ROW binlogs, FULL row metadata and ``max_binlog_size`` 1 GiB so one file holds
the whole workload.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from devtools.mariadb import MariaDBServer, MariaDBStartError  # noqa: E402

__all__ = ["binlog_input", "write_binlog"]


def write_binlog(target_bytes: int, out_dir: Path, fill) -> tuple[Path, int]:
    """Run ``fill(conn, target_bytes)`` (``workload.fill_binlog``) on a fresh server; copy the
    binlog file it names into ``out_dir``; return (path, row changes written)."""
    try:
        server = MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=1 << 30).start()
    except MariaDBStartError as exc:
        raise SystemExit(f"mariadbd did not start (install MariaDB: `make mariadb`): {exc}")
    try:
        conn = server.connect()
        try:
            name, written = fill(conn, target_bytes)
        finally:
            conn.close()
        out_dir.mkdir(parents=True, exist_ok=True)
        dest = out_dir / name
        shutil.copyfile(server.binlog_dir / name, dest)
        return dest, written.row_changes
    finally:
        server.stop()


def binlog_input(binlog_dir: str | None, mb: float, work: Path) -> Path:
    """The benchmark's binlogs: the files of ``binlog_dir`` (``--binlog-dir``), or else a
    ``mb`` MB binlog the workload (``workload.fill_binlog``) writes into ``work/binlogs``."""
    if binlog_dir:
        return Path(binlog_dir).resolve()
    from workload import fill_binlog

    out = work / "binlogs"
    print(f"writing a {mb:g} MB binlog with a throwaway MariaDB ...", flush=True)
    write_binlog(int(mb * 1e6), out, fill_binlog)
    return out
