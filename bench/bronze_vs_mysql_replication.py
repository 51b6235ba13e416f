#!/usr/bin/env python3
"""binlake's bronze stage against stock mysql-replication, on the same binlog, in one run.

``python bench/bronze_vs_mysql_replication.py [--mb 50] [--workload mixed|narrow|wide]
[--binlog-dir DIR] [--copies N]``
(``make bench``). Steps, each printed as it goes, then one table side by side:

1. A binlog file of ``--mb`` MB: a throwaway MariaDB (``binlog_row_metadata=FULL``,
   ``max_binlog_size`` 1 GiB so one file holds it all) runs ``bench/workload.py`` (multi-row
   INSERTs, range UPDATEs and DELETEs in transactions over four ~10-column tables) until the
   file is that big, then ``FLUSH BINARY LOGS``. With ``--binlog-dir DIR`` the largest
   ``*.NNNNNN`` file there is used instead (the server is started with it as its first binlog
   file, so the baseline can stream it).
2. Baseline: ``pymysqlreplication.BinLogStreamReader`` streams that file from the live server
   over the replication protocol (from the start to the file's last transaction, row events
   only; see :func:`mysql_replication` for why not ``blocking=False``) and touches
   ``event.rows`` so every row is decoded.
3. binlake's pure decode (``decode_file_batches(subprocess=False)``, in this process), and
   the same without the compiled row loop (the reference decoding, ``columnar=False``).
4. The whole ``binlake bronze`` stage (``run_bronze``: decode in worker processes + Delta
   write on the embedded Sail engine) on that one file, into a fresh lake; the Spark session
   is started (and the engine warmed up on a small file) before the clock starts.
5. The bronze stage on N = ``--copies`` (default: the number of cores) copies of the file in
   one run: total rows/s and the speed-up against one file.
6. Peak RSS of the decoding worker (``python -m pipelines.bronze.decode_task``) on a prefix
   of ~1/4 of the file and on the whole file: memory does not grow with the file.

Rows are counted as row changes (one per row of a rows event; an UPDATE's before and after
images count once), the unit both sides report. Counts that disagree are an error (exit 1).
The MariaDB root password stays inside the harness; nothing here prints it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import mmap
import os
import pstats
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from pipelines.bronze.decode_task import decode_file_batches  # noqa: E402
from pipelines.bronze.files import select_files  # noqa: E402
from pipelines.config import load_config  # noqa: E402
from pipelines.mysql.dsn import Dsn  # noqa: E402
from devtools.mariadb import BINLOG_BASENAME, MariaDBServer  # noqa: E402
from workload import WORKLOADS  # noqa: E402

MAX_BINLOG_SIZE = 1 << 30  # the server's maximum: the whole workload stays in one file
REPLICA_SERVER_ID = 4242
STOP_EVENT, ROTATE_EVENT, XID_EVENT = 3, 4, 16  # binlog event type codes
_ROW_KINDS = pa.array(["INSERT", "UPDATE", "DELETE"])
TARGET_RATIO = 5.0


@dataclass
class Figure:
    """One line of the result table."""

    method: str
    rows: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def timed(fn, *args) -> tuple[int, float]:
    """(rows returned by ``fn(*args)``, seconds it took)."""
    t0 = time.perf_counter()
    rows = fn(*args)
    return rows, time.perf_counter() - t0


def best(method: str, runs: int, attempt) -> Figure:
    """The fastest of ``runs`` calls of ``attempt(i) -> (rows, seconds)``; rows must agree."""
    tries = [attempt(i) for i in range(runs)]
    if len({rows for rows, _s in tries}) != 1:
        raise SystemExit(f"{method}: row counts differ between repeats: {tries}")
    fig = Figure(method, tries[0][0], min(sec for _r, sec in tries))
    each = ", ".join(f"{sec:.2f}" for _r, sec in tries)
    say(f"  {fig.rows:,} row images in {fig.seconds:.2f} s ({fig.rate:,.0f}/s)"
        + (f"; best of {runs}: {each} s" if runs > 1 else ""))
    return fig


def say(msg: str) -> None:
    print(msg, flush=True)


def mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


# -- 1. the binlog ------------------------------------------------------------------------

def generate(work: Path, target_mb: float, workload: str = "mixed"
             ) -> tuple[MariaDBServer, Path]:
    """Start a server, write the workload until its binlog holds ``target_mb``; copy it out."""
    server = MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=MAX_BINLOG_SIZE)
    t0 = time.perf_counter()
    server.start()
    say(f"  MariaDB {server.version()} on 127.0.0.1:{server.port} "
        f"(started in {server.start_seconds:.1f} s)")
    target = int(target_mb * 1e6)
    shown = [0.0]

    def progress(size: int) -> None:
        if sys.stdout.isatty():
            print(f"\r  writing: {mb(size)} / {mb(target)}", end="", flush=True)
        elif size >= shown[0] + target / 4:
            shown[0] = size
            say(f"  writing: {mb(size)} / {mb(target)}")

    conn = server.connect()
    try:
        name, written = WORKLOADS[workload](conn, target, progress=progress)
    finally:
        conn.close()
    if sys.stdout.isatty():
        print()
    src = server.binlog_dir / name
    out = work / "single" / name
    out.parent.mkdir(parents=True)
    shutil.copyfile(src, out)
    say(f"  {name}: {mb(out.stat().st_size)}, {written.transactions:,} transactions, "
        f"{written.statements:,} statements, {written.row_changes:,} row changes "
        f"({written.inserts:,} inserted, {written.updates:,} updated, {written.deletes:,} "
        f"deleted) in {time.perf_counter() - t0:.1f} s")
    return server, out


def serve_existing(work: Path, binlog_dir: str) -> tuple[MariaDBServer, Path]:
    """Use the largest binlog file of ``binlog_dir``; serve it as a fresh server's first file."""
    files = select_files(binlog_dir, all_files=True)
    if not files:
        raise SystemExit(f"--binlog-dir {binlog_dir}: no *.NNNNNN binlog files")
    src = Path(max(files, key=os.path.getsize))
    out = work / "single" / src.name
    out.parent.mkdir(parents=True)
    shutil.copyfile(src, out)
    server = MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=MAX_BINLOG_SIZE,
                           workdir=work / "mariadb")
    server.start()
    server.stop()  # clean shutdown: the next start opens a new file after ours
    first = server.binlog_dir / f"{BINLOG_BASENAME}.000001"
    shutil.copyfile(out, first)
    (server.binlog_dir / f"{BINLOG_BASENAME}.index").write_text(f"./{first.name}\n")
    for extra in server.binlog_dir.glob(f"{BINLOG_BASENAME}.0*"):
        if extra != first:
            extra.unlink()
    server.start()
    say(f"  {src}: {mb(out.stat().st_size)}, served by MariaDB {server.version()} on "
        f"127.0.0.1:{server.port} as {first.name}")
    return server, out


def _event_heads(path: Path):
    """(position, type code, length) of each complete event of a binlog file."""
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos, end = 4, len(buf)
        while pos + 19 <= end:  # the v4 header: timestamp, type, server_id, length, ...
            etype = buf[pos + 4]
            length = struct.unpack_from("<I", buf, pos + 9)[0]
            if length < 19 or pos + length > end:
                return
            yield pos, etype, length
            pos += length


def last_data_end(path: Path) -> int:
    """End position of the file's last event other than a closing ROTATE/STOP."""
    last = 4
    for pos, etype, length in _event_heads(path):
        if etype not in (ROTATE_EVENT, STOP_EVENT):
            last = pos + length
    return last


def cut_prefix(path: Path, out: Path, fraction: float) -> Path:
    """Copy the events of ``path`` up to the last transaction end within ``fraction`` of it."""
    limit = int(path.stat().st_size * fraction)
    cut = 0
    for pos, etype, length in _event_heads(path):
        if pos + length > limit:
            break
        if etype == XID_EVENT:
            cut = pos + length
    out.parent.mkdir(parents=True, exist_ok=True)
    with path.open("rb") as src, out.open("wb") as dst:
        dst.write(src.read(cut or limit))
    return out


# -- 2. mysql-replication -----------------------------------------------------------------

class StreamLost(RuntimeError):
    """mysql-replication lost its stream and would re-read the binlog from the start."""


def mysql_replication(server: MariaDBServer, end_pos: int) -> int:
    """Row changes read by BinLogStreamReader from the server's first binlog file to ``end_pos``.

    ``blocking=True`` with ``end_log_pos``: in non-blocking mode MariaDB 10.11 ends the dump
    by closing the connection as soon as it has *sent* the last event, and a client that
    decodes more slowly than the server sends gets a connection reset with events still
    unread; BinLogStreamReader then reconnects and, with ``is_mariadb`` and no GTID position,
    starts again from the first file: it never ends. Stopping at the file's last transaction
    end reads exactly the same events without that race. A second stream connection (that
    restart) raises :class:`StreamLost` instead of looping.
    """
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    dsn = Dsn.parse(server.dsn())  # the password stays in these dicts, never printed
    settings = {"host": dsn.host, "port": dsn.port, "user": dsn.user, "password": dsn.password,
                "read_timeout": 120}
    streams = 0

    def connect(**kwargs):
        nonlocal streams
        if kwargs.get("db") != "information_schema":  # not the schema (ctl) connection
            streams += 1
            if streams > 1:
                raise StreamLost("mysql-replication lost its replication stream")
        return pymysql.connect(**kwargs)

    # is_mariadb without auto_position asks for the first binlog file, from position 4.
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=REPLICA_SERVER_ID, is_mariadb=True,
        blocking=True, end_log_pos=end_pos,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        pymysql_wrapper=connect, enable_logging=False)
    rows = 0
    try:
        for event in stream:
            rows += len(event.rows)
    finally:
        stream.close()
    return rows


# -- 3. binlake decode alone --------------------------------------------------------------

def binlake_decode(path: Path, columnar: bool | None = None) -> int:
    """Row changes in the bronze batches of ``path``, decoded in this process (``columnar``:
    with the compiled row loop, without it, or None: as bronze decides by the file's size)."""
    rows = 0
    for batch in decode_file_batches(str(path), source_id="b", subprocess=False,
                                     columnar=columnar):
        kinds = batch.column("event_type")
        rows += pc.sum(pc.is_in(kinds, value_set=_ROW_KINDS)).as_py() or 0
        last = kinds[-1].as_py()
        if last == "ERROR":
            raise SystemExit(f"binlake decode failed: {batch.column('query')[-1].as_py()}")
    return rows


# -- 4/5. the bronze stage ----------------------------------------------------------------

def bronze_stage(spark, lake: Path, binlog_dir: Path, *,
                 expect: str = "completed") -> tuple[int, float]:
    """Run ``run_bronze --all`` over ``binlog_dir`` into the fresh lake ``lake``.

    Returns (row changes the stage counted in the bronze table, seconds).
    """
    from pipelines.bronze.job import run_bronze

    cfg = load_config(overrides={"lake.root": str(lake)})
    t0 = time.perf_counter()
    res = run_bronze(spark, cfg, binlog_dir=str(binlog_dir), all_files=True)
    seconds = time.perf_counter() - t0
    bad = [f for f in res.files if f.status != expect]
    if bad or not res.files:
        for f in bad:
            say(f"  ! {f.binlog_file}: {f.status} {f.error or ''}")
        raise SystemExit(f"bronze run over {binlog_dir} did not complete")
    return res.row_changes, seconds


def copies(src: Path, dest: Path, n: int) -> Path:
    """``n`` copies of ``src`` as ``<base>.000001`` … in ``dest`` (same bytes: fine for speed)."""
    dest.mkdir(parents=True)
    base = src.name.rsplit(".", 1)[0]
    for i in range(1, n + 1):
        shutil.copyfile(src, dest / f"{base}.{i:06d}")
    return dest


# -- 6. memory ----------------------------------------------------------------------------

# Runs the worker and prints its peak RSS. A child's ru_maxrss starts from the RSS of the
# process it was forked from (Linux carries the forked copy's high-water mark over exec), so
# the worker is started from this small launcher, not from the benchmark process with its
# embedded engine (which would add that process's hundreds of MB).
_RSS_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_pid, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def worker_peak_rss(path: Path) -> tuple[float, float]:
    """(peak RSS in bytes, seconds) of ``python -m pipelines.bronze.decode_task path``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    worker = [sys.executable, "-m", "pipelines.bronze.decode_task", str(path), "--source-id", "x"]
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _RSS_LAUNCHER, *worker], cwd=str(REPO), env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    try:
        code, max_kb = (int(v) for v in done.stdout.split())
    except ValueError:
        code, max_kb = -1, 0
    if done.returncode != 0 or code != 0:
        raise SystemExit(f"decode_task failed (exit {code}): {done.stderr[-500:]}")
    return max_kb * 1024.0, seconds  # Linux reports kilobytes


# -- the report ---------------------------------------------------------------------------

def table(figures: list[Figure], baseline: Figure) -> str:
    head = ["method", "row images", "seconds", "rows/s", "x vs mysql-replication"]
    body = [[f.method, f"{f.rows:,}", f"{f.seconds:.2f}", f"{f.rate:,.0f}",
             f"{f.rate / baseline.rate:.2f}x"] for f in figures]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    line = "|".join("-" * (w + 2) for w in widths)
    out = [" | ".join(h.ljust(w) for h, w in zip(head, widths)), line]
    for r in body:
        out.append(" | ".join([r[0].ljust(widths[0])] +
                              [v.rjust(w) for v, w in zip(r[1:], widths[1:])]))
    return "\n".join(out)


def profile_decode(path: Path, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    binlake_decode(path)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0,
                    help="size of the generated binlog file in MB (default 50)")
    ap.add_argument("--binlog-dir", help="use the largest binlog file of DIR instead")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="mixed",
                    help="the generated binlog's tables (bench/workload.py): mixed, narrow "
                         "or wide (DOUBLE, DECIMAL, DATETIME(6), a growing VARCHAR)")
    ap.add_argument("--copies", type=int, default=os.cpu_count() or 1,
                    help="files in the multi-file run (default: the number of cores)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time each speed figure this many times and keep the fastest")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--profile", type=int, nargs="?", const=25, default=0, metavar="TOP",
                    help="also cProfile binlake's decode and print the TOP functions")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if not 0 < args.mb <= 1000:
        ap.error("--mb must be in (0, 1000]: one binlog file holds at most 1 GiB")
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="binlake-bench-"))
    say(f"binlake bronze vs mysql-replication: {cores} cores, work dir {work}")
    server: MariaDBServer | None = None
    try:
        say("[1/6] binlog")
        if args.binlog_dir:
            server, big = serve_existing(work, args.binlog_dir)
        else:
            server, big = generate(work, args.mb, args.workload)
        size = big.stat().st_size

        say("[2/6] mysql-replication: BinLogStreamReader over the replication protocol")
        end_pos = last_data_end(big)
        base = best("mysql-replication (replication protocol)", args.repeat,
                    lambda _i: timed(mysql_replication, server, end_pos))
        server.stop()
        server = None

        say("[3/6] binlake decode alone (decode_file_batches, subprocess=False)")
        dec = best("binlake decode only (1 file, in-process)", args.repeat,
                   lambda _i: timed(binlake_decode, big))
        off = best("binlake decode, row loop off", args.repeat,
                   lambda _i: timed(binlake_decode, big, False))

        say("[4/6] binlake bronze stage, 1 file (decode + Delta write, embedded Sail)")
        from pipelines.engine.session import engine_name, get_spark

        cfg = load_config()
        t0 = time.perf_counter()
        spark = get_spark(cfg.engine)
        session_s = time.perf_counter() - t0
        quarter = cut_prefix(big, work / "quarter" / big.name, 0.25)
        t0 = time.perf_counter()
        bronze_stage(spark, work / "lake-warmup", quarter.parent, expect="partial")
        warm_s = time.perf_counter() - t0
        say(f"  Spark session ({engine_name()}) started in {session_s:.2f} s; engine warm-up "
            f"on the 1/4 file {warm_s:.2f} s (neither is in the figures); bronze settings: "
            f"decode_in_subprocess={cfg.bronze.decode_in_subprocess}, "
            f"batch_rows={cfg.bronze.batch_rows}")
        one = best("binlake bronze stage (1 file)", args.repeat,
                   lambda i: bronze_stage(spark, work / f"lake-single-{i}", big.parent))

        n = max(args.copies, 1)
        say(f"[5/6] binlake bronze stage, {n} files of {mb(size)} in one run")
        many_dir = copies(big, work / "many", n)
        many = best(f"binlake bronze stage ({n} files)", args.repeat,
                    lambda i: bronze_stage(spark, work / f"lake-many-{i}", many_dir))

        say("[6/6] peak RSS of the decoding worker (python -m pipelines.bronze.decode_task)")
        rss_q, sec_q = worker_peak_rss(quarter)
        rss_f, sec_f = worker_peak_rss(big)
        say(f"  1/4 file ({mb(quarter.stat().st_size)}): peak RSS {mb(rss_q)} ({sec_q:.1f} s)")
        say(f"  full file ({mb(size)}): peak RSS {mb(rss_f)} ({sec_f:.1f} s)")

        figures = [base, dec, off, one, many]
        say("")
        say(f"Results: {big.name}, {mb(size)}, {cores} cores")
        say(table(figures, base))
        say("")
        ratio = one.rate / base.rate
        verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
        say(f"bronze stage / mysql-replication decode = {ratio:.2f}x "
            f"(target >= {TARGET_RATIO:.0f}x: {verdict})")
        say(f"{n} files vs 1 file: {many.rate / one.rate:.2f}x rows/s on {cores} cores")
        say(f"decode worker peak RSS: {mb(rss_q)} for {mb(quarter.stat().st_size)}, "
            f"{mb(rss_f)} for {mb(size)} (x{rss_f / rss_q:.2f} memory for "
            f"x{size / quarter.stat().st_size:.1f} data)")
        say(f"row counts: mysql-replication {base.rows:,}, binlake decode {dec.rows:,}, "
            f"bronze {one.rows:,}, bronze x{n} {many.rows:,}")
        ok = base.rows == dec.rows == off.rows == one.rows and many.rows == n * one.rows
        if not ok:
            say("ERROR: row counts disagree: the two sides did not decode the same rows")
        if args.profile:
            say("")
            say(f"cProfile of binlake decode ({big.name}), top {args.profile} by own time:")
            say(profile_decode(big, args.profile))
        return 0 if ok else 1
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            say(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
