"""Stream benchmark: a sustained write load on a real MariaDB, followed by ``binlake stream``.

::

    .venv/bin/python bench/stream_load.py                    # 30 s of load, 2 writers
    .venv/bin/python bench/stream_load.py --seconds 60 --writers 4 --rows 50
    .venv/bin/python bench/stream_load.py --batch-interval-ms 500 --silver-lag 10

A throwaway MariaDB (``devtools/mariadb.py``, loopback only, its password never printed)
gets ``--writers`` threads writing transactions for ``--seconds``: a multi-row INSERT of
``--rows`` rows into a 10-column table (integers, DECIMAL, VARCHAR, DATETIME(6), JSON, BLOB),
an UPDATE of a few earlier rows and, every 10th transaction, a DELETE. ``python -m
pipelines.stream`` follows it from the first binlog into a temporary lake on the embedded
engine. Every second one line shows the writers' rate, the stream's events/s and row
changes/s, and its lag (seconds behind the newest event it read, and bytes behind the
server's binlog end). After the load: the time the stream needs to catch up, then SIGTERM,
and a summary (mean/peak rates, lag percentiles). Exit status 1 when the stream's row-change
count differs from what the writers changed.
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
    def __init__(self, server: MariaDBServer, n: int, rows: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.server, self.n, self.rows, self.stop = server, n, rows, stop
        self.changed = 0
        self.trx = 0

    def run(self) -> None:
        rnd = random.Random(self.n)
        conn = self.server.connect(autocommit=False)
        cur = conn.cursor()
        next_id = self.n << 40
        while not self.stop.is_set():
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
    ap.add_argument("--silver-lag", type=int, default=0, help="stream.silver_lag_seconds")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="binlake-stream-bench-"))
    lake = work / "lake"
    log = work / "stream.log"
    with MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=64 << 20,
                       workdir=work / "mariadb", keep=args.keep) as server:
        server.execute("CREATE DATABASE bench")
        server.execute(DDL)
        env = dict(os.environ, BINLAKE_SOURCE_DSN=server.dsn(), PYTHONPATH=str(ROOT),
                   BINLAKE_STREAM_BATCH_INTERVAL_MS=str(args.batch_interval_ms),
                   BINLAKE_STREAM_BATCH_ROWS=str(args.batch_rows),
                   BINLAKE_STREAM_SILVER_LAG_SECONDS=str(args.silver_lag))
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.stream", "--lake", str(lake),
                                 "--server-id", "9001"], cwd=ROOT, env=env,
                                stdout=log.open("wb"), stderr=subprocess.STDOUT)
        live_file = live_path(str(lake), "default")
        try:
            t0 = time.monotonic()
            while (read_live(live_file) or {}).get("state") != "running":
                if proc.poll() is not None or time.monotonic() - t0 > 120:
                    print(log.read_text()[-2000:], file=sys.stderr)
                    return 1
                time.sleep(0.1)
            print(f"stream started in {time.monotonic() - t0:.1f}s; {args.writers} writers x "
                  f"{args.rows} rows/transaction for {args.seconds:.0f}s")
            print(f"{'t':>5} {'writer rows/s':>13} {'stream ev/s':>11} {'rows/s':>9} "
                  f"{'lag s':>6} {'lag bytes':>10}  position")
            stop = threading.Event()
            writers = [Writer(server, n + 1, args.rows, stop) for n in range(args.writers)]
            for w in writers:
                w.start()
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
                if load_over is not None and behind == 0:
                    caught_up_at = time.monotonic()
                    break
                if load_over is not None and now - load_over > 300:
                    break
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        live = read_live(live_file) or {}
    written = sum(w.changed for w in writers)
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
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")
    if streamed != written or code != 0 or caught_up_at is None:
        print(f"MISMATCH: streamed {streamed} row changes, writers changed {written}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
