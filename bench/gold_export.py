#!/usr/bin/env python3
"""Gold export speed on a real server: the chosen method against bintrail's 1000-row
multi-row INSERTs and single-row INSERTs, side by side in one run.

``python bench/gold_export.py [--rows 200000] [--single-rows 20000] [--rounds 3]``

A throwaway MariaDB (``devtools/mariadb.py``, its tmpdir private) and a realistic silver
table (``devtools/silver_rows.py``: ~600-byte JSON images with 64-bit extremes and long
decimals, escaped pk_values, 12 hours) written on the embedded Sail engine. Two tables:

1. **Writer** — the wire methods alone: the silver rows read once into Arrow, turned into
   gold values, then written by one connection with ``exporter.write_chunk`` into a fresh
   ``binlog_events`` (same DDL, same hourly partitions); rounds interleave the methods and
   the best round counts (the machine may be shared). Methods: LOAD DATA LOCAL and
   multi-row INSERT … ON DUPLICATE KEY UPDATE at 1000 rows (bintrail's batch) and at the
   default ``gold.batch_rows``, and single-row INSERTs (committed per 1000) on
   ``--single-rows`` rows.
2. **Stage** — ``binlake gold`` end to end (``run_gold``: init, partitions, the parallel
   mapInArrow export on the engine's cores, the watermark) for the chosen method
   (``gold.method = auto``), the 1000-row INSERT and single-row INSERTs.

``python bench/gold_export.py --lake LAKE [--code OLD_TREE] [--rounds 2]`` instead exports
an existing lake's silver (e.g. the narrow 147 MB file indexed: ``binlake --lake LAKE index``) with
``binlake gold`` as a whole command (a process of its own, as a user runs it; the lake is only
read), into fresh throwaway servers of three configurations side by side: MariaDB's defaults
(128 MB buffer pool, 96 MB redo log), ``bench/pipeline.py``'s 1 GB buffer pool, and that plus
the redo log docs/gold.md recommends for bulk exports, and that without a binary log (as
Debian's MariaDB package runs; ``devtools/mariadb.py`` turns it on for binlake's sources)
(:data:`SERVER_CONFIGS`). Each run
reports its seconds and the CPU seconds of binlake and of the server (``/proc``): the server
is what an export waits for. ``--code OLD_TREE`` also runs another checkout's binlake in
every round, paired with this one (same servers, alternating).

Every database is checked to hold exactly the silver rows (exit 1 otherwise). The root
password stays inside the harness (the DSN reaches ``binlake gold`` by its environment).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402

from pipelines.config import GoldConfig, load_config  # noqa: E402
from pipelines.gold import ddl  # noqa: E402
from pipelines.gold.client import connect  # noqa: E402
from pipelines.gold.exporter import statement_limit, write_chunk  # noqa: E402
from pipelines.gold.job import run_gold  # noqa: E402
from pipelines.gold.rows import to_gold  # noqa: E402
from pipelines.lake.tables import SILVER_EVENTS, Lake  # noqa: E402
from pipelines.mysql.dsn import Dsn  # noqa: E402
from pipelines.engine.session import get_spark  # noqa: E402
from devtools.mariadb import MariaDBServer  # noqa: E402
from devtools.silver_rows import write_silver  # noqa: E402

DEFAULT_CHUNK = GoldConfig().batch_rows

# --lake: the gold servers side by side (the throwaway server's own settings otherwise:
# devtools/mariadb.py, e.g. no doublewrite and no flush at each commit).
SERVER_CONFIGS = {
    "MariaDB defaults": {"innodb_buffer_pool_size": "128M", "innodb_log_file_size": "96M"},
    "1 GB buffer pool": {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "96M"},
    "1 GB pool, 1 GB redo log": {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "1G"},
    "the same, no binary log": {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "1G",
                                "log-bin": False},
}


def _count(srv, db: str) -> tuple[int, int]:
    return tuple(srv.execute("SELECT COUNT(*), COUNT(DISTINCT source_id, binlog_file, start_pos, "
                             "row_in_event) FROM binlog_events", db=db)[0])


def _fresh_table(srv, db: str, first_hour: dt.datetime) -> None:
    srv.execute(f"DROP DATABASE IF EXISTS {db}")
    srv.execute(f"CREATE DATABASE {db}")
    srv.execute(ddl.create_events_sql(first_hour, 14), db=db)


def _writer(srv, db: str, gold: pa.Table, method: str, chunk_rows: int) -> float:
    # The export's own connection (strict mode, UTC; LOAD DATA bodies sent from memory).
    conn = connect(Dsn.parse(srv.dsn(db), setting="gold.dsn"), autocommit=False,
                   local_infile=method == "load_data", bulk=method == "bulk")
    limit = statement_limit(conn)  # asked once, as the export's tasks do
    t = time.monotonic()
    for batch in gold.to_batches(max_chunksize=chunk_rows):
        write_chunk(conn, batch, method, limit)
    secs = time.monotonic() - t
    conn.close()
    return secs


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _gold_command(tree: Path, lake: Path, srv, db: str) -> tuple[float, float, float, int]:
    """``binlake --lake LAKE gold`` of the checkout ``tree`` in a process of its own into a
    fresh database ``db``: (seconds, binlake CPU-s, server CPU-s, rows in gold)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    env["BINLAKE_GOLD_DSN"] = srv.dsn(db)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    cpu, server = _children_cpu(), _cpu_seconds(srv.pid)
    t = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pipelines", "--lake", str(lake), "gold"],
                          cwd=tree, env=env, capture_output=True, text=True)
    secs = time.monotonic() - t
    server, cpu = _cpu_seconds(srv.pid) - server, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"binlake gold ({tree}) exited {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()[-2000:]}")
    (rows,), = srv.execute(f"SELECT COUNT(*) FROM {db}.binlog_events")
    return secs, cpu, server, int(rows)


def lake_main(args) -> int:
    """``--lake``: the servers side by side (module docstring)."""
    lake = Path(args.lake).resolve()
    spark = get_spark()
    silver = Lake.of(load_config(env={}, overrides={"lake.root": str(lake)})).read(
        spark, SILVER_EVENTS)
    rows = silver.where("event_type IN ('INSERT', 'UPDATE', 'DELETE')").count()
    configs = list(SERVER_CONFIGS.items())
    if args.servers:
        configs = [configs[int(i) - 1] for i in args.servers.split(",")]
    trees = [("this tree", REPO)] + ([("--code", Path(args.code).resolve())] if args.code else [])
    print(f"silver: {rows:,} row changes in {lake}; {len(configs)} servers x "
          f"{len(trees)} tree(s) x {args.rounds} round(s)", flush=True)
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for rnd in range(args.rounds):
        for name, options in configs:
            for label, tree in (trees if rnd % 2 == 0 else trees[::-1]):
                with MariaDBServer(extra_options=options) as srv:
                    secs, cpu, server, got = _gold_command(tree, lake, srv, "bench_gold")
                if got != rows:
                    print(f"{name}, {label}: gold holds {got:,} rows, silver {rows:,}",
                          file=sys.stderr)
                    return 1
                results.setdefault((name, label), []).append((secs, cpu, server))
                print(f"  round {rnd + 1}: {name}, {label}: {secs:.2f} s, binlake {cpu:.1f} "
                      f"CPU-s, server {server:.1f} CPU-s, load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nbinlake gold as a whole command, {rows:,} row changes (best of {args.rounds} by "
          "seconds; CPU of that run):")
    print(f"{'server':<26} {'code':<10} {'seconds':>8} {'rows/s':>8} {'binlake CPU-s':>14} "
          f"{'server CPU-s':>13} {'server us/row':>14}")
    for (name, label), runs in results.items():
        secs, cpu, server = min(runs)
        print(f"{name:<26} {label:<10} {secs:>8.2f} {rows / secs:>8,.0f} {cpu:>14.1f} "
              f"{server:>13.1f} {1e6 * server / rows:>14.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--single-rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lake", help="export this lake's silver into servers side by side")
    ap.add_argument("--code", help="with --lake: also run this checkout's binlake, paired")
    ap.add_argument("--servers", help="with --lake: comma-separated numbers (1-based) of the "
                    "SERVER_CONFIGS to run (default all)")
    args = ap.parse_args(argv)
    if args.lake:
        return lake_main(args)

    spark = get_spark()
    work = Path(tempfile.mkdtemp(prefix="binlake-gold-bench-"))
    big, small = work / "big", work / "small"
    end = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    print(f"silver: {args.rows:,} rows (and {args.single_rows:,} for single-row) ...", flush=True)
    write_silver(spark, str(big / "silver" / "binlog_events"), args.rows, hours=12, end=end)
    write_silver(spark, str(small / "silver" / "binlog_events"), args.single_rows, hours=12, end=end)
    size = sum(f.stat().st_size for f in (big / "silver").rglob("*.parquet"))
    print(f"silver: {size / 1e6:.1f} MB of parquet", flush=True)

    def gold_values(lake: Path) -> pa.Table:
        df = spark.read.format("delta").load(str(lake / "silver" / "binlog_events"))
        tbl = df.toArrow()
        values = [to_gold(b)[0] for b in tbl.to_batches()]
        return pa.Table.from_batches(values)

    gold_big, gold_small = gold_values(big), gold_values(small)
    first_hour = end - dt.timedelta(hours=12)
    writers = [("MariaDB bulk (binary)", "bulk", DEFAULT_CHUNK, gold_big),
               ("LOAD DATA LOCAL", "load_data", DEFAULT_CHUNK, gold_big),
               ("LOAD DATA LOCAL", "load_data", 1000, gold_big),
               ("multi-row INSERT", "insert", DEFAULT_CHUNK, gold_big),
               ("multi-row INSERT (bintrail)", "insert", 1000, gold_big),
               ("single-row INSERT", "single", 1000, gold_small)]
    best: dict[int, float] = {}
    tmpd = tempfile.mkdtemp(prefix="binlake-gold-bench-mdb-")
    with MariaDBServer(extra_options={"innodb_buffer_pool_size": "256M",
                                      "innodb_log_file_size": "256M", "tmpdir": tmpd}) as srv:
        print(f"server: {srv.version()}, local_infile "
              f"{srv.execute('SELECT @@local_infile')[0][0]}", flush=True)
        for rnd in range(args.rounds):
            for i, (label, method, chunk, data) in enumerate(writers):
                db = f"w{i}"
                _fresh_table(srv, db, first_hour)
                secs = _writer(srv, db, data, method, chunk)
                if _count(srv, db) != (data.num_rows, data.num_rows):
                    print(f"{label}: gold does not hold the silver rows", file=sys.stderr)
                    return 1
                best[i] = min(best.get(i, secs), secs)
                print(f"  round {rnd + 1}: {label} x{chunk}: {data.num_rows / secs:,.0f} rows/s",
                      flush=True)

        stage = [("chosen (gold.method=auto)", big, args.rows, {}),
                 ("multi-row INSERT (bintrail)", big, args.rows,
                  {"gold.method": "insert", "gold.batch_rows": 1000}),
                 ("single-row INSERT", small, args.single_rows,
                  {"gold.method": "insert", "gold.batch_rows": 1000})]
        run_gold(spark, load_config(env={}, overrides={"lake.root": str(small),
                                                       "gold.dsn": srv.dsn("warmup")}))
        stage_res = []
        for i, (label, lake, n, extra) in enumerate(stage):
            db = f"s{i}"
            cfg = load_config(env={}, overrides={"lake.root": str(lake), "gold.dsn": srv.dsn(db),
                                                 **extra})
            if label.startswith("single"):
                # the baseline is not a configurable method: bypass GoldConfig validation
                g = GoldConfig.__new__(GoldConfig)
                for k, v in {**cfg.gold.__dict__, "method": "single"}.items():
                    object.__setattr__(g, k, v)
                cfg = replace(cfg, gold=g)
            t = time.monotonic()
            res = run_gold(spark, cfg)
            secs = time.monotonic() - t
            if _count(srv, db) != (n, n) or res.rows_inserted != n:
                print(f"{label}: gold does not hold the silver rows", file=sys.stderr)
                return 1
            stage_res.append((label, res.method, cfg.gold.batch_rows, res.tasks, n, secs))

    print(f"\nWriter alone (one connection, best of {args.rounds} rounds):")
    print(f"{'method':<30} {'chunk':>6} {'rows':>9} {'seconds':>8} {'rows/s':>9}")
    for i, (label, _m, chunk, data) in enumerate(writers):
        print(f"{label:<30} {chunk:>6} {data.num_rows:>9,} {best[i]:>8.2f} "
              f"{data.num_rows / best[i]:>9,.0f}")
    print("\nbinlake gold end to end (silver read + partitions + parallel export + watermark):")
    print(f"{'method':<30} {'wire':<10} {'chunk':>6} {'tasks':>5} {'rows':>9} {'seconds':>8} "
          f"{'rows/s':>9}")
    for label, method, chunk, tasks, n, secs in stage_res:
        print(f"{label:<30} {method:<10} {chunk:>6} {tasks:>5} {n:>9,} {secs:>8.2f} "
              f"{n / secs:>9,.0f}")
    rate = [n / s for *_x, n, s in stage_res]
    print(f"\nchosen = {stage_res[0][1]}: {rate[0] / rate[1]:.2f}x the 1000-row INSERT, "
          f"{rate[0] / rate[2]:.1f}x single-row INSERTs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
