"""Stream benchmark: a source writing steadily at a target rate, followed by ``binlake stream``.

::

    .venv/bin/python bench/stream_load.py --rate 5000 --seconds 60    # the two measured runs
    .venv/bin/python bench/stream_load.py --rate 20000 --seconds 60
    .venv/bin/python bench/stream_load.py --rate 0 --seconds 30       # as fast as it goes
    .venv/bin/python bench/stream_load.py --rate 5000 --seconds 60 --baseline c7cd826~1

A throwaway MariaDB (``devtools/mariadb.py``, loopback only, its password never printed)
gets ``--writers`` threads writing transactions for ``--seconds``: a multi-row INSERT of
``--rows`` rows into a 10-column table (integers, DECIMAL, VARCHAR, DATETIME(6), JSON, BLOB),
an UPDATE of a few earlier rows and, every 10th transaction, a DELETE; together paced to
``--rate`` row changes/s (0: unpaced). ``python -m pipelines.stream --mirror`` follows it from
the first binlog into a temporary lake on the embedded engine, silver and mirror following
bronze within ``stream.freshness_seconds`` (default 5). Every second one line shows the
writers' rate, the stream's events/s and row changes/s, and bronze's lag.

Latency, measured honestly: a separate thread commits one marker row (``bench.marker``) every
``--marker-every`` seconds and notes the wall clock right after its COMMIT returned (the
source commit; same machine, same clock). After the run, the Delta logs of silver
(``<lake>/silver/binlog_events``) and of the marker's mirror table (``<lake>/mirror/bench/
marker``) are read with pyarrow: a marker is *visible* at the ``commitInfo.timestamp`` of the
first Delta commit whose added files hold its row (silver: its pk_values; mirror: its id).
Reported: p50/p99/max of source commit → silver visible and → mirror visible, and the median
of the first and the last 10 s of markers (lag grows when the last is well above the first);
and bronze commit → silver visible (the first bronze commit holding the marker, its
``row_after``), which is what ``stream.freshness_seconds`` bounds: source → silver adds the
micro-batch's wait before the bronze commit.
Markers never seen count as missing. Exit status 1 when the stream's row-change count differs
from what the writers changed, or a marker never reached silver.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.stream.progress import live_path, read_live  # noqa: E402
from devtools.mariadb import MariaDBServer  # noqa: E402

DDL = """
    CREATE TABLE bench.load (
      id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
      writer TINYINT UNSIGNED NOT NULL,
      qty INT NOT NULL,
      amount DECIMAL(14,4) NOT NULL,
      name VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL,
      at DATETIME(6) NOT NULL,
      doc JSON NULL,
      blob_ BLOB NULL,
      note VARCHAR(255) NULL,
      revision INT NOT NULL DEFAULT 0
    ) ENGINE=InnoDB"""


class Writer(threading.Thread):
    def __init__(self, server: MariaDBServer, n: int, rows: int, stop: threading.Event,
                 rate: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.server, self.n, self.rows, self.stop = server, n, rows, stop
        self.rate = rate  # this writer's row changes/s (0: unpaced)
        self.changed = 0
        self.trx = 0

    def run(self) -> None:
        rnd = random.Random(self.n)
        conn = self.server.connect(autocommit=False)
        cur = conn.cursor()
        next_id = self.n << 40
        began = time.monotonic()
        while not self.stop.is_set():
            if self.rate:  # paced: never ahead of rate x elapsed
                ahead = self.changed / self.rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
            batch = [(next_id + i, self.n, rnd.randint(-1000, 1000),
                      f"{rnd.randint(0, 10 ** 9)}.{rnd.randint(0, 9999):04d}",
                      f"name {rnd.random():.6f} é",
                      f"2024-05-01 12:00:{rnd.randint(0, 59):02d}.123456",
                      json.dumps({"k": rnd.randint(0, 99), "t": ["a", "b"]}),
                      rnd.randbytes(rnd.randint(0, 64)), None) for i in range(self.rows)]
            cur.executemany("INSERT INTO bench.load (id, writer, qty, amount, name, at, doc, "
                            "blob_, note) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", batch)
            self.changed += self.rows
            if next_id > self.n << 40:
                lo = max(self.n << 40, next_id - 5 * self.rows)
                self.changed += cur.execute(
                    "UPDATE bench.load SET revision = revision + 1, note = 'u' "
                    "WHERE id BETWEEN %s AND %s", (lo, lo + 4))
            if self.trx % 10 == 9:
                self.changed += cur.execute("DELETE FROM bench.load WHERE id = %s",
                                            (next_id - self.rows,))
            conn.commit()
            next_id += self.rows
            self.trx += 1
        cur.close()
        conn.close()


class Markers(threading.Thread):
    """One marker row committed every ``every`` seconds; ``at[id]`` = the wall clock right
    after its COMMIT returned."""

    def __init__(self, server: MariaDBServer, every: float, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.server, self.every, self.stop = server, every, stop
        self.at: dict[int, float] = {}

    def run(self) -> None:
        conn = self.server.connect(autocommit=False)
        cur = conn.cursor()
        n = 0
        while not self.stop.wait(self.every):
            n += 1
            cur.execute("INSERT INTO bench.marker (id, note) VALUES (%s, %s)", (n, "m"))
            conn.commit()
            self.at[n] = time.time()
        cur.close()
        conn.close()


def first_visible(table: Path, key_of) -> dict[int, float]:
    """Per marker id, the epoch seconds of the first Delta commit of ``table`` whose added
    files hold it (``key_of(row) -> id or None``), from the log's commitInfo timestamps."""
    import pyarrow.parquet as pq

    seen: dict[int, float] = {}
    logdir = table / "_delta_log"
    if not logdir.is_dir():
        return seen
    for commit in sorted(logdir.glob("[0-9]*.json"), key=lambda p: int(p.stem)):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        at = info.get("timestamp", commit.stat().st_mtime * 1000) / 1000
        for a in actions:
            if "add" not in a:
                continue
            parts = a["add"].get("partitionValues") or {}
            data = pq.read_table(table / a["add"]["path"]).to_pylist()
            for row in data:
                key = key_of({**parts, **row})
                if key is not None:
                    seen.setdefault(key, at)
    return seen


def _silver_marker(row) -> int | None:
    if row.get("schema_name") == "bench" and row.get("table_name") == "marker" \
            and row.get("event_type") == "INSERT":
        return int(row["pk_values"])
    return None


def _bronze_marker(row) -> int | None:
    """A marker's id from its bronze row: the first positional value of its after image
    (bronze keeps them as JSON text or a list, as its declaration gives them)."""
    if row.get("schema_name") == "bench" and row.get("table_name") == "marker" \
            and row.get("event_type") == "INSERT":
        after = row["row_after"]
        values = json.loads(after) if isinstance(after, (str, bytes)) else after
        return int(values[0])
    return None


def _latency(name: str, made: dict[int, float], seen: dict[int, float]
             ) -> tuple[str, bool, dict[str, str]]:
    """(the line, every marker seen, the figures for the side-by-side table)."""
    lags = [seen[k] - made[k] for k in sorted(made) if k in seen]
    missing = len(made) - len(lags)
    if not lags:
        return (f"source commit -> {name} visible: no marker seen ({missing} missing)", False,
                {f"{name} p50 / p99": "none seen", f"{name} first -> last 10 s": "-"})
    window = max(1, len(lags) // 6)  # 10 s of a 60 s run
    first, last = statistics.median(lags[:window]), statistics.median(lags[-window:])
    figures = {f"{name} p50 / p99": f"{_pct(lags, 50):.1f} / {_pct(lags, 99):.1f} s"
               + (f" ({missing} never)" if missing else ""),
               f"{name} first -> last 10 s": f"{first:.1f} -> {last:.1f} s"}
    return (f"source commit -> {name} visible over {len(lags)} markers: p50 "
            f"{_pct(lags, 50):.2f}s, p99 {_pct(lags, 99):.2f}s, max {max(lags):.2f}s; first "
            f"{window} markers median {first:.2f}s, last {window} {last:.2f}s"
            + (f"; {missing} never visible" if missing else "")), missing == 0, figures


def _pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the writers write")
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=20, help="rows per INSERT (one per transaction)")
    ap.add_argument("--batch-interval-ms", type=int, default=1000)
    ap.add_argument("--batch-rows", type=int, default=50000)
    ap.add_argument("--rate", type=float, default=5000.0,
                    help="target row changes/s of all writers together (0: unpaced)")
    ap.add_argument("--marker-every", type=float, default=0.5,
                    help="seconds between marker commits")
    ap.add_argument("--silver-lag", type=int, default=30,
                    help="stream.silver_lag_seconds (0: silver and mirror do not follow)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--no-mirror", dest="mirror", action="store_false",
                    help="the stream without --mirror (silver alone follows bronze)")
    ap.add_argument("--baseline", metavar="REV",
                    help="first run the same load against the stream of git revision REV "
                         "(checked out into a temporary worktree), then this checkout's; a "
                         "table of both runs' figures side by side at the end")
    args = ap.parse_args(argv)
    if not args.baseline:
        code, _ = _measure(args, ROOT)
        return code
    tree = Path(tempfile.mkdtemp(prefix="binlake-stream-baseline-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                    args.baseline], check=True, capture_output=True)
    try:
        print(f"== baseline: {args.baseline} ==")
        base_code, base = _measure(args, tree)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
    print("== this checkout ==")
    code, here = _measure(args, ROOT)
    names = list(dict.fromkeys([*base, *here]))
    width = max(len(n) for n in names)
    print(f"\n{'':{width}}  {args.baseline[:24]:>24}  {'this checkout':>24}")
    for n in names:
        print(f"{n:{width}}  {base.get(n, '-'):>24}  {here.get(n, '-'):>24}")
    return code or base_code


def _measure(args, root: Path) -> tuple[int, dict[str, str]]:
    """One run of the load against the stream of the code at ``root``: (exit status, the
    figures for the side-by-side table)."""
    work = Path(tempfile.mkdtemp(prefix="binlake-stream-bench-"))
    lake = work / "lake"
    log = work / "stream.log"
    with MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=64 << 20,
                       workdir=work / "mariadb", keep=args.keep) as server:
        server.execute("CREATE DATABASE bench")
        server.execute(DDL)
        server.execute("CREATE TABLE bench.marker (id INT PRIMARY KEY, note VARCHAR(8)) "
                       "ENGINE=InnoDB")
        env = dict(os.environ, BINLAKE_SOURCE_DSN=server.dsn(), PYTHONPATH=str(root),
                   BINLAKE_STREAM_BATCH_INTERVAL_MS=str(args.batch_interval_ms),
                   BINLAKE_STREAM_BATCH_ROWS=str(args.batch_rows),
                   BINLAKE_STREAM_SILVER_LAG_SECONDS=str(args.silver_lag))
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.stream", "--lake", str(lake),
                                 "--server-id", "9001", *["--mirror"] * args.mirror],
                                cwd=root, env=env,
                                stdout=log.open("wb"), stderr=subprocess.STDOUT)
        live_file = live_path(str(lake), "default")
        try:
            t0 = time.monotonic()
            while (read_live(live_file) or {}).get("state") != "running":
                if proc.poll() is not None or time.monotonic() - t0 > 120:
                    print(log.read_text()[-2000:], file=sys.stderr)
                    return 1, {}
                time.sleep(0.1)
            print(f"stream started in {time.monotonic() - t0:.1f}s; {args.writers} writers x "
                  f"{args.rows} rows/transaction for {args.seconds:.0f}s")
            print(f"{'t':>5} {'writer rows/s':>13} {'stream ev/s':>11} {'rows/s':>9} "
                  f"{'lag s':>6} {'lag bytes':>10}  position")
            stop = threading.Event()
            writers = [Writer(server, n + 1, args.rows, stop, args.rate / args.writers)
                       for n in range(args.writers)]
            markers = Markers(server, args.marker_every, stop)
            for w in writers:
                w.start()
            markers.start()
            start = time.monotonic()
            rates, lags, last_w, last_rows, last_t = [], [], 0, 0, start
            load_over = caught_up_at = None
            while True:
                time.sleep(1.0)
                now = time.monotonic()
                if load_over is None and now - start >= args.seconds:
                    stop.set()
                    for w in writers:
                        w.join()
                    markers.join()
                    load_over = time.monotonic()
                live = read_live(live_file) or {}
                end_file, end_pos = server.execute("SHOW MASTER STATUS")[0][:2]
                behind = (int(end_pos) - int(live.get("pos") or 0)
                          if live.get("file") == end_file else None)
                written = sum(w.changed for w in writers)
                rows = int(live.get("row_changes") or 0)
                dt_ = now - last_t
                line = (f"{now - start:5.0f} {(written - last_w) / dt_:13,.0f} "
                        f"{live.get('events_per_second', 0):11,.0f} "
                        f"{(rows - last_rows) / dt_:9,.0f} "
                        f"{live.get('lag_seconds', 0):6.1f} "
                        f"{behind if behind is not None else 'other file':>10}  "
                        f"{live.get('file')}:{live.get('pos')}")
                print(line, flush=True)
                if load_over is None:
                    rates.append(float(live.get("events_per_second", 0)))
                    lags.append(float(live.get("lag_seconds", 0)))
                last_w, last_rows, last_t = written, rows, now
                if load_over is not None and behind == 0 and caught_up_at is None:
                    caught_up_at = time.monotonic()
                if caught_up_at is not None and now - caught_up_at > 12:
                    break  # silver and mirror follow within the bound after bronze
                if load_over is not None and now - load_over > 300:
                    break
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        live = read_live(live_file) or {}
        silver = first_visible(lake / "silver" / "binlog_events", _silver_marker)
        bronze = first_visible(lake / "bronze" / "binlog_events", _bronze_marker)
        mirror = first_visible(lake / "mirror" / "bench" / "marker",
                               lambda r: int(r["id"]) if "id" in r else None) \
            if args.mirror else None
    written = sum(w.changed for w in writers) + len(markers.at)
    streamed = int(live.get("row_changes") or 0)
    print(f"\nload: {written:,} row changes in {sum(w.trx for w in writers):,} transactions "
          f"over {args.seconds:.0f}s ({written / args.seconds:,.0f}/s)")
    print(f"stream: {live.get('events', 0):,} events, {streamed:,} row changes; events/s mean "
          f"{statistics.mean(rates) if rates else 0:,.0f}, peak {max(rates, default=0):,.0f}")
    print(f"lag during load: p50 {_pct(lags, 50):.1f}s, p95 {_pct(lags, 95):.1f}s, "
          f"max {max(lags, default=0):.1f}s")
    if caught_up_at is not None:
        print(f"caught up {caught_up_at - load_over:.1f}s after the load stopped; "
              f"stopped with exit status {code}")
    else:
        print("did not catch up within 300 s")
    silver_line, silver_ok, silver_fig = _latency("silver", markers.at, silver)
    mirror_line, _, mirror_fig = (_latency("mirror", markers.at, mirror) if args.mirror
                                  else ("", True, {}))
    print(silver_line)
    # The freshness bound is to the bronze commit: each marker from its bronze commit.
    after_bronze = {k: bronze[k] for k in silver if k in bronze}
    fresh_line, _, fresh_fig = _latency("silver", after_bronze, silver)
    print(fresh_line.replace("source commit -> silver", "bronze commit -> silver"))
    if args.mirror:
        print(mirror_line)
    figures = {"written": f"{written / args.seconds:,.0f}/s",
               "bronze lag p50 / max": f"{_pct(lags, 50):.1f} / {max(lags, default=0):.1f} s",
               "caught up after the load": (f"{caught_up_at - load_over:.1f} s"
                                            if caught_up_at is not None else "never"),
               **silver_fig,
               **{k.replace("silver", "bronze -> silver"): v for k, v in fresh_fig.items()},
               **mirror_fig}
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")
    if streamed != written or code != 0 or caught_up_at is None or not silver_ok:
        print(f"MISMATCH: streamed {streamed} row changes, writers changed {written}",
              file=sys.stderr)
        return 1, figures
    return 0, figures


if __name__ == "__main__":
    sys.exit(main())
