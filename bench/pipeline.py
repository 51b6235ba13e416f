#!/usr/bin/env python3
"""The whole index path, stage by stage, side by side with its references, in one run.

``python bench/pipeline.py [--mb 60] [--workload mixed|narrow|wide] [--binlog-dir DIR] [--repeat 1]
[--keep] [--one-commit] [--stages bronze,silver,...]`` (``make bench``).

1. Input: the binlog files of ``--binlog-dir`` or one file of ``--mb`` MB written by a
   throwaway MariaDB (``bench/binlog_server.py`` + ``bench/workload.py``): ``mixed``, four
   ~10-column tables with TEXT (~390 bytes a row change), ``narrow``, a measured
   file's shape (one 8-column table, ~140 bytes a row change: ``--mb 147`` holds ~1.03 M), or
   ``wide`` (one table with DOUBLE, DECIMAL, DATETIME(6) and a VARCHAR growing
   on UPDATE: ``--mb 147`` holds 1.05 M row changes in ~157 MB).
   ``bronze-loop-off``: bronze again without the compiled row loop (the reference decoding).
   ``silver-no-derive``: silver without its derivation step (FK actions, TRUNCATE, partition
   drops, ADD COLUMN fills: ``silver/derived.py``), against silver: what deriving costs.
2. Reference: ``mariadb-binlog --base64-output=decode-rows -v`` over every file (to /dev/null).
3. ``bronze``: ``run_bronze`` into a fresh lake (the engine started and warmed beforehand);
   with ``--one-commit`` also ``bronze (one commit)`` and ``silver (one commit)``
   (``commit_mb = 0``: the whole run in one commit, without the memory bound).
4. ``silver``: ``run_silver`` (rendering in the engine's Python), and ``silver (render
   workers)`` with ``silver.render_in_subprocess = true`` on a fresh silver.
   ``engine-writer``: bronze and silver again with ``lake.writer = "engine"`` (the engine's
   Delta writer, not binlake's tasks: ``pipelines/lake/task_files.py``), against the stages
   above; with ``stage-commands``, the two commands that way too. ``key-history``
   (``bench/key_history.py``): silver written both ways from the bronze left, then what one
   key's history reads from each (row groups, bytes, seconds).
5. ``quality``: ``run_quality`` over all silver rows; ``stage-commands``: ``binlake bronze``
   and then ``binlake silver`` over the bronze it left, each a process of its own (start-up
   and first loads included: silver's compiled loops, bronze's decoding workers).
6. ``index``: bronze + silver + quality on a fresh lake, the way ``binlake index`` runs them
   (quality over every row the run's silver added);
   ``binlake index`` as a whole command (a process of its own: start-up, the engine, the
   three stages), and ``binlake index --gold-dsn`` into a throwaway local MariaDB
   (``GOLD_SERVER_OPTIONS``; a fresh database each run; the DSN goes by environment, never on
   a command line).
7. Scale: one new small file (``samples/binlogs/mariadb-bin.000003``, numbered after the
   input's last file) indexed after that history, against the same file on an empty lake;
   in this process, and (``small-command``) as ``binlake index`` commands of their own, the
   way a scheduled job indexes the newest file. ``large-file``: the input's last file once
   more, numbered after it (a link), indexed after the history against an empty lake: what
   a day's large file costs a lake with a history, time and memory. ``batch``: every input
   file once more, numbered after the input (links), in one run, the same way: what a day's
   batch of binlogs costs (its quality checks a window of several files).
   ``many-runs``: one new small file after ``--runs`` more runs of one small file each on a
   copy of the history (made before the clock starts), against small-file's run after the
   history: what a scheduled job's run costs once the runs before it left their commits and
   files.

The stages run in rounds, each stage once per round in the order above, ``--repeat`` rounds:
a stage and its reference run within a minute of each other (this machine's speed drifts over
minutes). Each figure is the best of its rounds. Per stage: seconds, row changes/s, the ratio
to its reference (``mariadb-binlog -v`` for bronze, bronze for silver and quality and index)
of those best figures, and the median (min–max) of the ratios paired round by round,
the peak memory of the whole process tree (the sum of PSS over this process with the
embedded engine, the decoding and rendering workers; not the gold server's) and the cores
kept busy (CPU seconds of the tree less the sampling's own / wall seconds), sampled from
``/proc`` every 100 ms. The machine may be shared: compare the ratios, measured in the same
run, rather than the absolute figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from binlog_server import write_binlog  # noqa: E402
from key_history import key_history  # noqa: E402
from workload import WORKLOADS  # noqa: E402

from pipelines.bronze.files import select_files  # noqa: E402
from pipelines.config import load_config  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def say(msg: str) -> None:
    print(msg, flush=True)


# -- the process tree: peak RSS and CPU seconds -------------------------------------------

def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


_WALK_BELOW = 256 * 2**20
_COUNTERS = (b"VmRSS", b"RssAnon", b"RssShmem")
_WALK_EVERY = 10  # ticks


def _memory(pid: int, walk: bool = True) -> int | None:
    """A process's memory in bytes, its proportional set size: pages shared by forked workers
    are counted once in a tree's sum (RSS would count them in every process). Reading it
    (smaps) walks every page under the process's memory-map lock and stalls its allocations
    (index whole command on 250 MB: 8.5 s alone, 10.2 s sampled so every 100 ms), so: a
    process of :data:`_WALK_BELOW` or more (the engine's) counts its resident anonymous and
    shared memory, the kernel's running counters; a smaller one is walked only when ``walk``
    (None if not)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            counters = {k: int(v.split()[0]) * 1024 for k, _, v in
                        (line.partition(b":") for line in fh) if k in _COUNTERS}
    except (OSError, ValueError, IndexError):
        return 0
    if counters.get(b"VmRSS", 0) >= _WALK_BELOW:
        return counters.get(b"RssAnon", 0) + counters.get(b"RssShmem", 0)
    if not walk:
        return None
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# Processes this script starts that are not binlake's (the gold server): their memory and CPU
# are not the stage's, and reading a server's smaps every tick would slow it down.
NOT_MEASURED: set[int] = set()


# The commands a stage runs now (:func:`_run_command`): a whole command's figures are their
# process trees', not this process's (it holds an engine of its own) nor its other children's.
RUNNING: set[int] = set()


def _run_command(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, **kwargs)``, its process in :data:`RUNNING` while it runs."""
    with subprocess.Popen(cmd, **kwargs) as proc:
        RUNNING.add(proc.pid)
        try:
            out, err = proc.communicate()
        finally:
            RUNNING.discard(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _tree(walk: bool = True, young=lambda pid: False,
          roots: set[int] | None = None) -> dict[int, tuple[float, int | None]]:
    """pid → (CPU seconds, PSS bytes) for this process (or the processes ``roots``) and all
    their descendants but :data:`NOT_MEASURED` (memory None: not walked this time,
    :func:`_memory`; a process for which ``young(pid)`` holds is walked every time: a
    decoding worker may live a second)."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, [os.getpid()] if roots is None else list(roots)
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in NOT_MEASURED:
            out[pid] = (stats[pid][1], _memory(pid, walk or young(pid)))
            todo += children.get(pid, [])
    return out


class TreeMeter:
    """Samples the process tree while a stage runs: peak memory (PSS) and CPU seconds used.
    ``commands``: the trees of the commands it runs (:data:`RUNNING`) instead of this
    process's."""

    def __init__(self, interval: float = 0.1, commands: bool = False) -> None:
        self.interval = interval
        self.commands = commands

    def _tree(self, walk: bool = True) -> dict[int, tuple[float, int | None]]:
        return _tree(walk, self._young, set(RUNNING) if self.commands else None)

    def __enter__(self) -> "TreeMeter":
        self._ticks = 0
        self.born: dict[int, int] = {}  # the tick each process was first seen
        self.base = {pid: cpu for pid, (cpu, _) in self._tree().items()}
        self.last: dict[int, float] = dict(self.base)
        self.peak = 0
        self._stop = threading.Event()
        self.own_cpu = 0.0
        self.pss: dict[int, int] = {}  # the last PSS read of each process
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def _young(self, pid: int) -> bool:
        """Seen for less than :data:`_WALK_EVERY` ticks: a process that lives a second or
        less (the decoding workers of a small file) is walked every tick, or its peak would
        be missed (60 MB bronze: 516 MiB counted without walking them, ~750 MiB with)."""
        return self._ticks - self.born.setdefault(pid, self._ticks) < _WALK_EVERY

    def _sample(self, walk: bool = True) -> None:
        tree = self._tree(walk)
        for pid, (_, pss) in tree.items():
            if pss is not None:
                self.pss[pid] = pss
        self.peak = max(self.peak, sum(self.pss.get(pid, 0) for pid in tree))
        for pid, (cpu, _) in tree.items():
            self.last[pid] = max(cpu, self.last.get(pid, 0.0))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample(walk=self._ticks % _WALK_EVERY == 0)  # small processes: every second
            self._ticks += 1
            self._stop.wait(self.interval)
        self.own_cpu = time.thread_time()  # the sampling itself, not the stage's work

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.started
        self._stop.set()
        self._thread.join()
        self._sample()
        self.cpu = sum(cpu - self.base.get(pid, 0.0) for pid, cpu in self.last.items())
        if not self.commands:  # the sampling ran in this process
            self.cpu = max(self.cpu - self.own_cpu, 0.0)


@dataclass
class Figure:
    stage: str
    rows: int
    seconds: float
    peak_mem: int
    cpu: float
    reference: str = ""
    load: float = 0.0  # the 1-minute load average when the run ended

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    @property
    def cores(self) -> float:
        return self.cpu / self.seconds if self.seconds else 0.0


def measure(stage: str, run, reference: str = "") -> Figure:
    """One run of ``run() -> rows`` (it prepares its own state), sampled: the command's
    process tree where it runs one (``run.command``, :func:`_run_command`)."""
    with TreeMeter(commands=getattr(run, "command", False)) as meter:
        rows = run()
    load = os.getloadavg()[0]
    say(f"  {stage}: {rows:,} rows in {meter.seconds:.2f} s ({rows / meter.seconds:,.0f}/s)"
        f", peak PSS {meter.peak / 2**20:,.0f} MiB, {meter.cpu / meter.seconds:.2f} cores"
        f", load {load:.1f}")
    return Figure(stage, rows, meter.seconds, meter.peak, meter.cpu, reference, load)


def best(stage: str, repeat: int, run, reference: str = "") -> Figure:
    """The fastest of ``repeat`` runs of ``run() -> rows`` one after the other."""
    return min((measure(stage, run, reference) for _ in range(repeat)),
               key=lambda f: f.seconds)


def rounds(plan: list[tuple[str, object, str]], repeat: int, first: Figure
           ) -> dict[str, list[Figure]]:
    """Every stage of ``plan`` (name, run, reference) once per round, in order, ``repeat``
    rounds (``first``: round 1's run of the first stage, made already).

    Why rounds and not each stage ``repeat`` times in a row: this machine's speed drifts
    over minutes (the same ``binlake index`` took 10.8 s, then 15.0 s five minutes later,
    nothing else running), so a stage measured minutes after its reference would carry the
    drift into its ratio. In a round a stage and its reference run within a minute of each
    other, and :func:`table` also prints the ratio of each round's pair."""
    runs: dict[str, list[Figure]] = {name: [] for name, _, _ in plan}
    runs[plan[0][0]].append(first)
    for r in range(repeat):
        say(f"  round {r + 1} of {repeat}")
        for i, (name, run, reference) in enumerate(plan):
            if r == 0 and i == 0:
                continue
            getattr(run, "prepare", lambda: None)()  # unmeasured set-up (many-runs)
            runs[name].append(measure(name, run, reference))
    return runs


def _paired(runs: dict[str, list[Figure]], f: Figure) -> str:
    """Median (min–max) over rounds of the stage's rate against its reference's in the same
    round."""
    mine, refs = runs.get(f.stage, []), runs.get(f.reference, [])
    ratios = sorted((a.rate / b.rate) for a, b in zip(mine, refs) if b.rate)
    if not ratios:
        return "—"
    mid = ratios[len(ratios) // 2] if len(ratios) % 2 else \
        (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    return f"{mid:.2f}x ({ratios[0]:.2f}–{ratios[-1]:.2f})" if len(ratios) > 1 else f"{mid:.2f}x"


def table(figures: list[Figure], runs: dict[str, list[Figure]] | None = None) -> str:
    """The figures as one Markdown table; with ``runs`` (stages run in rounds) also each
    round's ratio to the reference, paired (:func:`rounds`)."""
    by_name = {f.stage: f for f in figures}
    paired = runs is not None
    lines = ["| stage | seconds | row changes/s | ratio to reference "
             + ("| paired ratio per round: median (min–max) " if paired else "")
             + "| peak memory (tree) | cores busy | load |",
             "|---|---:|---:|---|" + ("---|" if paired else "") + "---:|---:|---:|"]
    for f in figures:
        ref = by_name.get(f.reference)
        ratio = f"{f.rate / ref.rate:.2f}x {f.reference}" if ref and ref.rate else "—"
        if paired:
            ratio += f" | {_paired(runs, f)}"
        lines.append(f"| {f.stage} | {f.seconds:.2f} | {f.rate:,.0f} | {ratio} | "
                     f"{f.peak_mem / 2**20:,.0f} MiB | {f.cores:.2f} | {f.load:.1f} |")
    return "\n".join(lines)


# -- the stages ----------------------------------------------------------------------------

# The gold server as one would size it for a gold table of millions of rows: InnoDB's
# buffer pool holds the table's unique key (the 128 MB default stops fitting it past ~1M rows
# and every insert then waits on the disk). The redo log holds one export's redo (~0.7 KB a
# row change: docs/gold.md recommends 1 GB; with MariaDB 10.11's 96 MB default the server
# spent 46 CPU-s instead of 37 on the narrow file's 1.03M row changes, flushing pages to advance
# its checkpoint; devtools' test servers shrink it to 8 MB).
# innodb_autoinc_lock_mode is MariaDB's default, 1 (docs/gold.md); the rest is devtools'
# server (binary log on, relaxed flushing: with MariaDB's own flushing and no binary log the
# 250 MB export took the same time, 11.7 s, measured).
GOLD_SERVER_OPTIONS = {"innodb_buffer_pool_size": "1G", "innodb_log_file_size": "1G"}


def _gold_server():
    """A throwaway MariaDB for gold (``devtools/mariadb.py``; its password never printed)."""
    from devtools.mariadb import MariaDBServer, MariaDBStartError

    try:
        server = MariaDBServer(extra_options=GOLD_SERVER_OPTIONS).start()
    except MariaDBStartError as exc:
        raise SystemExit(f"mariadbd did not start (install MariaDB: `make mariadb`): {exc}")
    NOT_MEASURED.add(server.pid)
    return server


def _binlake(lake: Path, *argv: str, env: dict | None = None) -> None:
    """``binlake --lake LAKE ARGV…`` in a process of its own (this environment less its
    ``BINLAKE_`` settings, plus ``env``); a failure stops the bench with its last output."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    cmd = [sys.executable, "-m", "pipelines", "--lake", str(lake), *argv]
    done = _run_command(cmd, cwd=REPO, env={**clean, **(env or {})}, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"binlake {argv[0]} exited {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()[-2000:]}")


def _index_command(lake: Path, binlog_dir: Path, rows: int, gold=None):
    """``binlake index`` (and ``--gold-dsn`` with ``gold``) in a process of its own, on a
    fresh lake (and a fresh gold database) each run; the gold DSN goes by environment."""
    runs = iter(range(1, 1000))

    def run() -> int:
        shutil.rmtree(lake, ignore_errors=True)
        db = f"bench_gold_{next(runs)}"
        _binlake(lake, "index", "--binlog-dir", str(binlog_dir), "--all",
                 env={"BINLAKE_GOLD_DSN": gold.dsn(db)} if gold is not None else None)
        if gold is not None:
            (got,), = gold.execute(f"SELECT count(*) FROM {db}.binlog_events")
            if got != rows:
                raise SystemExit(f"gold holds {got} rows, silver {rows}")
        return rows

    run.command = True
    return run


def _without_derivation(run_silver_stage):
    """The silver stage with its derivation step (``silver/job._derive_again``: the rows
    the server changed without logging them) left out: what deriving costs a workload."""
    def run() -> int:
        import pipelines.silver.job as job

        saved = job._derive_again
        job._derive_again = lambda *args, **kwargs: (0, "bench:not-derived")
        try:
            return run_silver_stage()
        finally:
            job._derive_again = saved
    return run


def _stage_commands(lake: Path, binlog_dir: Path, rows: int, env: dict | None = None):
    """``binlake bronze`` into a fresh lake, and ``binlake silver`` over the bronze it left
    (silver removed first), each a process of its own: what a user who runs the stages one
    by one waits for, start-up and first loads included (``env``: settings of both)."""
    def bronze() -> int:
        shutil.rmtree(lake, ignore_errors=True)
        _binlake(lake, "bronze", "--binlog-dir", str(binlog_dir), "--all", env=env)
        return rows

    def silver() -> int:
        if not (lake / "bronze").is_dir():
            raise SystemExit("binlake silver (whole command) runs over the bronze that "
                             "binlake bronze (whole command) leaves")
        shutil.rmtree(lake / "silver", ignore_errors=True)
        _binlake(lake, "silver", env=env)
        return rows

    bronze.command = silver.command = True
    return bronze, silver


def _small_command(work: Path, paths: list[str], numbers, target: Path | None):
    """``binlake index`` of one new small file (:func:`_next_small_file`) in a process of its
    own, into ``target`` (None: a new empty lake each run)."""
    def run() -> int:
        n = next(numbers)
        small = _next_small_file(work / f"next{n}", paths, n)
        _binlake(target if target is not None else work / f"small{n}", "index",
                 "--binlog-dir", str(small.parent), "--files", small.name)
        return SMALL_FILE_ROWS

    run.command = True
    return run


SMALL_FILE_ROWS = 295  # samples/binlogs/mariadb-bin.000003: mariadb-binlog -v's row changes


def _mariadb_binlog(paths: list[str], rows: int):
    exe = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if exe is None:
        raise SystemExit("mariadb-binlog not found: install MariaDB (`make mariadb`)")

    def run() -> int:
        with open(os.devnull, "wb") as null:
            done = _run_command([exe, "--base64-output=decode-rows", "-v", *paths],
                                stdout=null, stderr=subprocess.DEVNULL)
        if done.returncode != 0:
            raise SystemExit(f"{exe} exited {done.returncode}")
        return rows

    run.command = True
    return run


def _next_name(where: Path, paths: list[str], n: int) -> Path:
    """``where``/the name of the ``n``-th file after the input's last (``where`` created)."""
    base, _, number = os.path.basename(paths[-1]).rpartition(".")
    where.mkdir(parents=True, exist_ok=True)
    return where / f"{base}.{int(number) + n:0{len(number)}d}"


def _next_small_file(where: Path, paths: list[str], n: int) -> Path:
    """The sample file, alone in ``where``, named as the ``n``-th file after the input's last."""
    out = _next_name(where, paths, n)
    shutil.copyfile(REPO / "samples" / "binlogs" / "mariadb-bin.000003", out)
    return out


STAGES = ("mariadb-binlog", "bronze-loop-off", "silver", "silver-no-derive", "silver-workers", "engine-writer", "key-history",
          "quality", "index", "stage-commands", "index-command", "index-gold", "small-file",
          "small-command", "large-file", "batch", "many-runs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=60.0, help="size of the generated binlog")
    ap.add_argument("--binlog-dir", help="index the binlog files of DIR instead")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="mixed",
                    help="the generated binlog's tables: mixed (four ~10-column tables with "
                         "TEXT), narrow (one 8-column table, ~140 bytes "
                         "a row change) or wide (DOUBLE, DECIMAL, DATETIME(6), "
                         "a growing VARCHAR)")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per stage")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--one-commit", action="store_true",
                    help="also run bronze and silver in one commit per run (commit_mb = 0, "
                         "the former behaviour): peak memory side by side")
    ap.add_argument("--runs", type=int, default=100,
                    help="many-runs: the small runs made (unmeasured) before the measured one")
    ap.add_argument("--stages", default=",".join(STAGES),
                    help=f"comma-separated subset of {','.join(STAGES)} (bronze always runs)")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="binlake-bench-pipeline-"))
    try:
        if args.binlog_dir:
            binlog_dir = Path(args.binlog_dir)
        else:
            binlog_dir = work / "binlogs"
            say(f"1. writing a {args.mb:g} MB {args.workload} binlog with a throwaway MariaDB ...")
            path, written = write_binlog(int(args.mb * 1e6), binlog_dir,
                                         WORKLOADS[args.workload])
            say(f"  {path.name}: {path.stat().st_size / 1e6:,.1f} MB, {written:,} row changes")
        paths = select_files(str(binlog_dir), all_files=True)
        if not paths:
            raise SystemExit(f"{binlog_dir}: no *.NNNNNN binlog files")
        size = sum(os.path.getsize(p) for p in paths)
        say(f"  input: {len(paths)} file(s), {size / 1e6:,.1f} MB")
        return _run(args, work, binlog_dir, paths)
    finally:
        if args.keep:
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _run(args, work: Path, binlog_dir: Path, paths: list[str]) -> int:
    from pipelines.bronze.job import run_bronze
    from pipelines.quality import Window, run_quality
    from pipelines.engine.session import get_spark
    from pipelines.silver.job import run_silver

    def cfg_for(lake: Path, **overrides):
        return load_config(env={}, overrides={"lake.root": str(lake), **overrides})

    spark = get_spark(cfg_for(work / "warm").engine)
    lake = work / "lake"

    def bronze(**overrides):
        def run() -> int:
            shutil.rmtree(lake, ignore_errors=True)
            res = run_bronze(spark, cfg_for(lake, **overrides), binlog_dir=str(binlog_dir),
                             all_files=True)
            if res.failed:
                raise SystemExit(f"bronze failed: "
                                 f"{[(f.binlog_file, f.error) for f in res.failed]}")
            return res.row_changes
        return run

    def silver(**overrides):
        def run() -> int:
            shutil.rmtree(lake / "silver", ignore_errors=True)
            return run_silver(spark, cfg_for(lake, **overrides)).appended
        return run

    def quality() -> int:
        run_quality(spark, cfg_for(lake), window="all")
        return rows  # every silver row (the workload has no quarantined rows)

    def index_files(where: Path, directory: Path, files: list[str] | None = None) -> int:
        """bronze, silver, and quality over every row silver added, as ``binlake index``."""
        cfg = cfg_for(where)
        res = run_bronze(spark, cfg, binlog_dir=str(directory), files=files,
                         all_files=files is None)
        before = run_silver(spark, cfg).version_before
        run_quality(spark, cfg, window=Window(since=before if before is not None else -1))
        return res.row_changes

    def index() -> int:
        shutil.rmtree(lake, ignore_errors=True)
        return index_files(lake, binlog_dir)

    numbers = iter(range(1, 10**6))

    def one_new_file(target: Path | None):
        """Index one new small file into ``target`` (None: a new empty lake each run)."""
        def run() -> int:
            n = next(numbers)
            small = _next_small_file(work / f"next{n}", paths, n)
            where = target if target is not None else work / f"small{n}"
            return index_files(where, small.parent, [small.name])
        return run

    def once_more(target: Path | None, inputs: list[str]):
        """Index ``inputs`` once more, numbered after the input's last file (links), in one
        run into ``target`` (None: a new empty lake each run, removed after)."""
        def run() -> int:
            ns = [next(numbers) for _ in inputs]
            links = [_next_name(work / f"again{ns[0]}", paths, n) for n in ns]
            for path, link in zip(inputs, links):
                os.symlink(os.path.abspath(path), link)
            where = target if target is not None else work / f"againlake{ns[0]}"
            try:
                return index_files(where, links[0].parent, [link.name for link in links])
            finally:
                if target is None:
                    shutil.rmtree(where, ignore_errors=True)
        return run

    def after_runs(count: int):
        """Index one new small file into a copy of the history after ``count`` runs of one
        new small file each (made by ``run.prepare``, unmeasured): what a scheduled job's run
        costs once the lake holds the runs before it (every run appends to the small tables
        the next one reads whole: pipelines/lake/few_files.py)."""
        where = work / "runs"

        def prepare() -> None:
            shutil.rmtree(where, ignore_errors=True)
            shutil.copytree(lake, where)
            started, rows = time.perf_counter(), 0
            for _ in range(count):
                n = next(numbers)
                rows += index_files(where, _next_small_file(work / f"next{n}", paths, n).parent)
            say(f"  many-runs: {count} runs of {rows:,} row changes made on a copy of the "
                f"history in {time.perf_counter() - started:.1f} s (not measured)")

        def run() -> int:
            n = next(numbers)
            small = _next_small_file(work / f"next{n}", paths, n)
            return index_files(where, small.parent, [small.name])

        run.prepare = prepare
        return run

    say("2. warming the engine up on the first file ...")
    run_bronze(spark, cfg_for(work / "warm"), binlog_dir=str(binlog_dir),
               files=[os.path.basename(paths[0])])
    say("3. stages")
    stages = set(args.stages.split(","))
    unknown = stages - set(STAGES) - {"bronze", ""}
    if unknown:
        raise SystemExit(f"--stages: unknown {sorted(unknown)}; known: {', '.join(STAGES)}")
    if (stages & {"small-file", "small-command", "large-file", "batch", "many-runs"}
            and not stages & {"index", "index-command"}):
        raise SystemExit("--stages: small-file, small-command, large-file, batch and many-runs "
                         "index after the history the index or index-command stage leaves: "
                         "add one of them")
    if "many-runs" in stages and "small-file" not in stages:
        raise SystemExit("--stages: many-runs is compared with small-file's run after the "
                         "history: add small-file")
    if "engine-writer" in stages and "silver" not in stages:
        raise SystemExit("--stages: engine-writer is compared with bronze and silver: add silver")
    if "quality" in stages and not stages & {"silver", "silver-workers"}:
        raise SystemExit("--stages: quality checks the silver the silver stage writes: add "
                         "silver (or silver-workers)")
    one = {"bronze.commit_mb": 0, "silver.commit_mb": 0}
    first = measure("bronze", bronze(), "mariadb-binlog -v")  # round 1's: the row count
    rows = first.rows
    plan: list[tuple[str, object, str]] = [("bronze", bronze(), "mariadb-binlog -v")]
    if "mariadb-binlog" in stages:
        plan.append(("mariadb-binlog -v", _mariadb_binlog(paths, rows), ""))
    if "bronze-loop-off" in stages:  # the reference decoding: no compiled row loop
        plan.append(("bronze, row loop off", bronze(**{"bronze.compiled_min_mb": 1e9}),
                     "bronze"))
    if "silver" in stages:
        plan.append(("silver", silver(), "bronze"))
    if "silver-no-derive" in stages:  # the cost of deriving (FK actions, TRUNCATE, ...)
        plan.append(("silver, derivation off", _without_derivation(silver()), "silver"))
    if "silver-workers" in stages:
        plan.append(("silver (render workers)",
                     silver(**{"silver.render_in_subprocess": True}), "bronze"))
    if "engine-writer" in stages:  # the engine's Delta writer writing the same tables
        engine = {"lake.writer": "engine"}
        plan.append(("bronze, the engine's writer", bronze(**engine), "bronze"))
        plan.append(("silver, the engine's writer", silver(**engine), "silver"))
    if "quality" in stages:
        plan.append(("quality", quality, "bronze"))
    if "index" in stages:
        plan.append(("index (bronze+silver+quality)", index, "bronze"))
    if "stage-commands" in stages:
        bronze_cmd, silver_cmd = _stage_commands(work / "commands", binlog_dir, rows)
        plan.append(("binlake bronze (whole command)", bronze_cmd, "mariadb-binlog -v"))
        plan.append(("binlake silver (whole command)", silver_cmd,
                     "binlake bronze (whole command)"))
        if "engine-writer" in stages:
            bronze_cmd, silver_cmd = _stage_commands(work / "commands", binlog_dir, rows,
                                                     {"BINLAKE_LAKE_WRITER": "engine"})
            plan.append(("binlake bronze (whole command), the engine's writer", bronze_cmd,
                         "binlake bronze (whole command)"))
            plan.append(("binlake silver (whole command), the engine's writer", silver_cmd,
                         "binlake silver (whole command)"))
    if "index-command" in stages:
        plan.append(("binlake index (whole command)", _index_command(lake, binlog_dir, rows),
                     "bronze"))
    with contextlib.ExitStack() as stack:
        if "index-gold" in stages:
            server = stack.enter_context(_gold_server())
            plan.append(("binlake index --gold-dsn (whole command)",
                         _index_command(lake, binlog_dir, rows, server), "bronze"))
        if "small-file" in stages:
            plan.append(("small file, empty lake", one_new_file(None), ""))
            plan.append(("small file after the history", one_new_file(lake),
                         "small file, empty lake"))
        if "many-runs" in stages:
            plan.append((f"small file after {args.runs} more runs", after_runs(args.runs),
                         "small file after the history"))
        if "small-command" in stages:
            plan.append(("binlake index, small file, empty lake",
                         _small_command(work, paths, numbers, None), ""))
            plan.append(("binlake index, small file after the history",
                         _small_command(work, paths, numbers, lake),
                         "binlake index, small file, empty lake"))
        if "large-file" in stages:
            plan.append(("large file, empty lake", once_more(None, paths[-1:]), ""))
            plan.append(("large file after the history", once_more(lake, paths[-1:]),
                         "large file, empty lake"))
        if "batch" in stages:
            plan.append(("batch, empty lake", once_more(None, paths), ""))
            plan.append(("batch after the history", once_more(lake, paths),
                         "batch, empty lake"))
        runs = rounds(plan, args.repeat, first)
    figures = [min(runs[name], key=lambda f: f.seconds) for name, _, _ in plan]
    if "mariadb-binlog" in stages:  # the reference first
        figures.insert(0, figures.pop(1))
    if args.one_commit:  # last: the memory this process keeps after them would count above
        figures.append(best("bronze (one commit)", args.repeat, bronze(**one),
                            "mariadb-binlog -v"))
        figures.append(best("silver (one commit)", args.repeat, silver(**one), "bronze"))
    history = key_history(spark, cfg_for, lake, work, say) if "key-history" in stages else ""
    say("")
    say(table(figures, runs))
    if history:
        say("")
        say(history)
    return 0


if __name__ == "__main__":
    sys.exit(main())
