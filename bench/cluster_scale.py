#!/usr/bin/env python3
"""Scale on the cluster: the same binlogs through the embedded engine and a standalone cluster.

``python bench/cluster_scale.py [--gb 10] [--files 40] [--workload mixed|narrow]
[--binlog-dir DIR | --keep-binlogs DIR] [--configs embedded,cluster-1,cluster-2]
[--stages bronze,silver[,quality]] [--executor-memory 3g] [--driver-memory 2g]
[--results FILE] [--keep]``

1. Input: ``--files`` binlog files of ``--gb``/``--files`` GB each, written once by a
   throwaway MariaDB (``devtools/mariadb.py``, ``binlog_row_metadata=FULL``) running a
   workload of ``bench/workload.py`` (``mixed`` by default: four ~10-column tables with TEXT,
   ~390 bytes a row change): ``max_binlog_size`` is the file size, so the server rotates by
   itself, and for the last file it is raised so that the workload ends it at its size and
   rotates it (every row change the workload counts is in the files). The generation's MB/s
   and row changes/s are printed. ``--keep-binlogs DIR`` writes the files there (kept), and
   ``--binlog-dir DIR`` takes the files of DIR instead of generating any.
2. Each configuration of ``--configs``, on a fresh lake (removed after it unless ``--keep``):

   - ``embedded``: ``python -m pipelines.cli.main --lake LAKE bronze --binlog-dir DIR --all``,
     then ``... silver`` (and with ``--stages bronze,silver,quality``, ``... quality --window
     all``), each a process of its own: the
     default engine (Sail, in the command's process) with its decoding workers.
   - ``cluster-1``, ``cluster-2``: a Spark standalone cluster on loopback
     (``devtools/spark_cluster.py``: a master and 1 or 2 workers, each its own JVM, 1 core
     each, ``--executor-memory`` per worker), and per stage one ``spark-submit`` the way
     ``conf/spark-submit.sh`` runs it (the same options: Delta's jars from the venv's
     ``delta-jars``, its SQL extension and catalog, UTC; plus :data:`CLUSTER_CONFS`): one
     executor per worker, whose Python workers decode and render.

   Binlogs and lakes are on this machine's local disk: every process of the one-machine
   cluster reads the same paths (the object-store form is tests/acceptance/test_standalone_cluster.py).
3. Per stage: the whole command's seconds (a process start, the engine or JVM and the session,
   the stage, the shutdown) and the stage's own seconds as it prints them (after its session
   exists; quality prints none: its rates are on the command's), MB/s of binlog and row
   changes/s on the stage's seconds; the
   cores kept busy (CPU seconds of the processes below / the command's wall seconds); the
   peak of the processes' memory summed (as bench/pipeline.py counts it: PSS for processes
   under 256 MiB, resident anonymous + shared memory above); and the peak RSS (VmRSS) of each
   process, the largest per kind: the embedded command's process (engine inside), the
   cluster's driver JVM and driver Python, each executor JVM and each Python worker (the
   embedded engine's decoding workers; the executors' ``pyspark.daemon`` and its forks), all
   sampled from ``/proc`` every 100 ms. Measured: the command's process tree and, on the
   cluster, the worker JVMs' children (the executors and their Python workers); never the
   master or worker JVMs themselves, nor this script.
4. Correctness: bronze's row changes (its summary line), silver's appended row changes and
   the silver table's row count (``numRecords`` of its Delta log's files) must be equal, equal
   in every configuration, and equal to the row changes the workload wrote; else exit 1.
5. One table at the end: rows stage × figure, columns the configurations side by side and the
   speed-up from one worker to two (cluster-1's seconds / cluster-2's). ``--results FILE``
   writes each configuration's figures to FILE as it ends, and puts those of configurations
   FILE holds but this run does not measure into the table (same input only): the
   configurations can be measured by separate runs.

The machine may be shared; on a 2-core machine two 1-core workers also take the core the
driver needs: the 1 → 2 worker figure is the first step of a scaling curve, not the curve.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from pipeline import RUNNING, TreeMeter, _run_command, _stat, _tree, say  # noqa: E402
from workload import WORKLOADS  # noqa: E402

from pipelines.bronze.files import select_files  # noqa: E402

CONFIGS = ("embedded", "cluster-1", "cluster-2")
STAGES = ("bronze", "silver", "quality")
# Beyond conf/spark-submit.sh's own options: the small-machine settings the local JVM engine
# uses (docs/engines.md: 8 shuffle partitions, 4 Delta snapshot partitions, no UI).
CLUSTER_CONFS = ("spark.sql.shuffle.partitions=8", "spark.databricks.delta.snapshotPartitions=4",
                 "spark.ui.enabled=false", "spark.log.level=WARN")
KINDS = ("engine process", "driver JVM", "driver Python", "executor JVM", "Python worker",
         "launcher JVM", "other")
MiB = 2**20


# -- the input -------------------------------------------------------------------------------

def generate(gb: float, files: int, out: Path, workload: str) -> tuple[int, float]:
    """``files`` binlog files of ``gb / files`` GB each into ``out`` by a throwaway MariaDB;
    (row changes written, seconds)."""
    from devtools.mariadb import MariaDBServer, MariaDBStartError

    per_file = int(gb * 1e9 / files)
    if not 1 << 20 <= per_file <= 1 << 30:
        raise SystemExit(f"--gb/--files: {per_file / 1e6:,.1f} MB a file; MariaDB's "
                         "max_binlog_size takes 1 MB to 1 GiB here")
    limit = per_file // 4096 * 4096  # max_binlog_size is kept in 4 KiB steps
    try:
        server = MariaDBServer(binlog_row_metadata="FULL", max_binlog_size=limit).start()
    except MariaDBStartError as exc:
        raise SystemExit(f"mariadbd did not start (install MariaDB: `make mariadb`): {exc}")
    say(f"1. writing {files} binlog files of {per_file / 1e6:,.1f} MB ({workload} workload) "
        f"with a throwaway MariaDB ...")
    started = time.perf_counter()
    try:
        conn = server.connect()
        last = {"raised": False, "count": 0, "at": started}

        def progress(_size: int) -> None:
            # the server rotates at max_binlog_size; in the last file the limit goes up, so
            # the workload itself ends that file at limit + 4 KiB and rotates it
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                count = len(cur.fetchall())
                if count >= files and not last["raised"]:
                    cur.execute("SET GLOBAL max_binlog_size = 1073741824")
                    last["raised"] = True
            if count != last["count"] and time.perf_counter() - last["at"] > 30:
                last["at"] = time.perf_counter()
                say(f"  file {count} of {files} ({time.perf_counter() - started:,.0f} s)")
            last["count"] = count

        try:
            _, written = WORKLOADS[workload](conn, limit + 4096, progress=progress)
        finally:
            conn.close()
        seconds = time.perf_counter() - started
        out.mkdir(parents=True, exist_ok=True)
        closed = server.binlog_files()[:-1]  # the last is the empty one the rotation opened
        for f in closed:
            shutil.move(str(f), str(out / f.name))
    finally:
        server.stop()
    size = sum(f.stat().st_size for f in out.iterdir())
    say(f"  {len(closed)} files, {size / 1e9:,.2f} GB, {written.row_changes:,} row changes in "
        f"{seconds:,.1f} s: {size / 1e6 / seconds:,.1f} MB/s, "
        f"{written.row_changes / seconds:,.0f} row changes/s")
    return written.row_changes, seconds


# -- measuring ---------------------------------------------------------------------------------

def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _kind(pid: int, argv: list[str]) -> str | None:
    """The kind of a process by its command line (None: not known yet, e.g. spark-submit's
    shell scripts before they exec the JVM)."""
    exe = os.path.basename(argv[0]) if argv else ""
    if exe == "java":
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv:
            return "executor JVM"
        if "org.apache.spark.deploy.SparkSubmit" in argv:
            return "driver JVM"
        if "org.apache.spark.launcher.Main" in argv:  # spark-class's, before the exec
            return "launcher JVM"
        return "other"
    if exe.startswith("python"):
        if len(argv) > 1 and argv[1].endswith("pipelines/cli/main.py"):
            return "driver Python"  # the cluster's, started by the driver JVM
        if pid in RUNNING:
            return "engine process"  # the embedded command itself
        return "Python worker"  # pyspark.daemon and its forks; the embedded decoding workers
    return None


class ProcessMeter(TreeMeter):
    """:class:`TreeMeter` over the running commands' trees and the children of ``daemons``
    (the worker JVMs: their executors), never ``daemons`` themselves; and also each process's
    peak RSS by its kind.

    The kind is read again every sample and a process counts under the last it had: a JVM
    starts a process by spawning a helper that shows the JVM's command line until it execs
    the Python (or spark-submit's shell becomes the driver JVM), so the peaks are kept per
    (process, kind) and only those of a process's last kind count."""

    def __init__(self, daemons: set[int] = frozenset()) -> None:
        super().__init__(commands=True)
        self.daemons = set(daemons)
        self.rss: dict[tuple[int, str], int] = {}
        self.kind: dict[int, str] = {}

    def _tree(self, walk: bool = True):
        tree = _tree(walk, self._young, set(RUNNING) | self.daemons)
        for pid in self.daemons:
            tree.pop(pid, None)
        return tree

    def _sample(self, walk: bool = True) -> None:
        tree = self._tree(walk)
        helpers = set()
        for pid, (cpu, pss) in tree.items():
            if pss is not None:
                self.pss[pid] = pss
            self.last[pid] = max(cpu, self.last.get(pid, 0.0))
            argv = _argv(pid)
            kind = _kind(pid, argv)
            if kind is None:  # a shell, before its exec
                continue
            if kind.endswith("JVM"):
                parent = _stat(pid)
                if parent is None or _argv(parent[0]) == argv:
                    # a JVM's spawn helper (the JVM's memory, not its own), or gone already
                    helpers.add(pid)
                    continue
            self.kind[pid] = kind
            rss = _rss(pid)
            if rss:
                self.rss[pid, kind] = max(self.rss.get((pid, kind), 0), rss)
        self.peak = max(self.peak, sum(self.pss.get(pid, 0) for pid in tree
                                       if pid not in helpers))

    def per_kind(self) -> dict[str, tuple[int, int]]:
        """kind → (the largest peak RSS of a process of that kind, how many there were)."""
        out: dict[str, tuple[int, int]] = {}
        for pid, kind in self.kind.items():
            peak, n = out.get(kind, (0, 0))
            out[kind] = (max(peak, self.rss.get((pid, kind), 0)), n + 1)
        return out


@dataclass
class Stage:
    stage: str
    seconds: float  # the whole command
    stage_seconds: float | None  # as the stage prints it
    rows: int
    cpu: float
    tree_peak: int
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    note: str = ""

    @property
    def cores(self) -> float:
        return self.cpu / self.seconds if self.seconds else 0.0


_BRONZE = re.compile(r"^bronze: (\d+) file\(s\), (\d+) row changes in ([\d.]+)s", re.M)
_SILVER = re.compile(r"^silver: .*?(\d+) row changes appended, (\d+) in quarantine, version "
                     r"\S+ in ([\d.]+)s", re.M)
_QUALITY = re.compile(r"^quality: (\w+), \d+ rule\(s\) over (\d+) silver row", re.M)


def _parse(stage: str, out: str) -> tuple[int, float | None, str]:
    """(row changes, the stage's own seconds, a note) from a stage's output."""
    if stage == "bronze":
        m = _BRONZE.search(out)
        if m:
            return int(m.group(2)), float(m.group(3)), f"{m.group(1)} files"
    elif stage == "silver":
        m = _SILVER.search(out)
        if m:
            return int(m.group(1)), float(m.group(3)), f"{m.group(2)} quarantined"
    else:
        m = _QUALITY.search(out)
        if m:
            return int(m.group(2)), None, m.group(1)
    raise SystemExit(f"{stage}: no summary line in its output:\n{out[-3000:]}")


def run_stage(stage: str, cmd: list[str], env: dict, logs: Path, daemons: set[int] = frozenset()
              ) -> Stage:
    """One stage's command, measured; its output in ``logs``/STAGE.out and .err."""
    out_path, err_path = logs / f"{stage}.out", logs / f"{stage}.err"
    with open(out_path, "w") as out, open(err_path, "w") as err, \
            ProcessMeter(daemons) as meter:
        done = _run_command(cmd, cwd=logs, env=env, stdout=out, stderr=err)
    text = out_path.read_text(errors="replace")
    if done.returncode not in (0,) and not (stage == "quality" and _QUALITY.search(text)):
        raise SystemExit(f"{stage} exited {done.returncode}:\n{text[-2000:]}\n"
                         f"{err_path.read_text(errors='replace')[-4000:]}")
    rows, stage_seconds, note = _parse(stage, text)
    fig = Stage(stage, meter.seconds, stage_seconds, rows, meter.cpu, meter.peak,
                meter.per_kind(), note)
    kinds = ", ".join(f"{k} {v[0] / MiB:,.0f} MiB" + (f" (max of {v[1]})" if v[1] > 1 else "")
                      for k, v in sorted(fig.kinds.items(), key=lambda kv: KINDS.index(kv[0])))
    own = f", stage {stage_seconds:.1f} s" if stage_seconds is not None else ""
    say(f"  {stage}: {rows:,} row changes, command {fig.seconds:.1f} s{own}, "
        f"{fig.cores:.2f} cores, peak {fig.tree_peak / MiB:,.0f} MiB summed; RSS: {kinds}"
        f" [{note}]")
    return fig


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BINLAKE_") and k not in ("SPARK_REMOTE",
                                                         "SPARK_CONNECT_MODE_ENABLED",
                                                         "SPARK_LOCAL_REMOTE")}
    return dict(env, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable)


def _stage_argv(stage: str, binlog_dir: Path) -> list[str]:
    if stage == "bronze":
        return ["bronze", "--binlog-dir", str(binlog_dir), "--all"]
    if stage == "quality":
        return ["quality", "--window", "all"]
    return [stage]


def run_embedded(lake: Path, binlog_dir: Path, stages: list[str], logs: Path) -> list[Stage]:
    env = _clean_env()
    return [run_stage(s, [sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake),
                          *_stage_argv(s, binlog_dir)], env, logs) for s in stages]


def _submit_argv(master: str, args) -> list[str]:
    """spark-submit with conf/spark-submit.sh's options (its submit()), plus ours."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    jars = sorted((Path(sys.prefix) / "delta-jars").glob("*.jar"))
    if not jars:
        raise SystemExit(f"no Delta jars in {Path(sys.prefix) / 'delta-jars'}: `make setup`")
    import pipelines.cli.main as entry

    confs = (*CLUSTER_CONFS, f"spark.executor.memory={args.executor_memory}",
             f"spark.driver.memory={args.driver_memory}")
    return [str(spark_home / "bin" / "spark-submit"), "--master", master,
            "--jars", ",".join(str(j) for j in jars),
            "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
            "--conf", "spark.sql.catalog.spark_catalog="
                      "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "--conf", "spark.sql.session.timeZone=UTC",
            *[a for c in confs for a in ("--conf", c)], entry.__file__]


def run_cluster(workers: int, lake: Path, binlog_dir: Path, stages: list[str], logs: Path,
                args) -> tuple[list[Stage], float]:
    """The stages on a fresh standalone cluster of ``workers`` 1-core workers; (figures, the
    cluster's start-up seconds)."""
    import pyspark

    from devtools.spark_cluster import StandaloneCluster

    env = _clean_env()
    spark_home = str(Path(pyspark.__file__).parent)
    submit_env = dict(env, SPARK_HOME=spark_home, PYTHON=sys.executable,
                      SPARK_LOCAL_IP="127.0.0.1",
                      PATH=f"{spark_home}/bin:{env.get('PATH', '')}")
    started = time.perf_counter()
    with StandaloneCluster(workers, cores=1, memory=args.executor_memory, env=env) as cluster:
        up = time.perf_counter() - started
        say(f"  cluster up in {up:.1f} s: {workers} worker(s) x 1 core, "
            f"{args.executor_memory} each")
        daemons = {p.pid for p in cluster._procs
                   if "org.apache.spark.deploy.worker.Worker" in _argv(p.pid)}
        if len(daemons) != workers:
            raise SystemExit(f"found {len(daemons)} worker JVMs, not {workers}")
        submit = _submit_argv(cluster.url, args)
        figures = []
        for s in stages:
            try:
                figures.append(run_stage(s, [*submit, "--lake", str(lake),
                                             *_stage_argv(s, binlog_dir)],
                                         submit_env, logs, daemons))
            except SystemExit:
                say(cluster.logs())
                raise
    return figures, up


def silver_table_rows(lake: Path) -> int | None:
    """The silver table's rows by its Delta log (numRecords of the live files)."""
    from deltalake import DeltaTable

    try:
        actions = DeltaTable(str(lake / "silver" / "binlog_events")).get_add_actions(
            flatten=True)
        column = actions.column("num_records")
        values = column.to_pylist()
    except Exception as exc:  # noqa: BLE001 - the check reports, the table stays
        say(f"  silver table's row count unread: {exc}")
        return None
    if any(v is None for v in values):
        return None
    return int(sum(values))


# -- the table ---------------------------------------------------------------------------------

LABELS = {"embedded": "embedded", "cluster-1": "cluster, 1 worker",
          "cluster-2": "cluster, 2 workers"}


def table(results: dict[str, list[Stage]], size: int) -> str:
    configs = [c for c in CONFIGS if c in results]
    both = "cluster-1" in results and "cluster-2" in results
    head = ["stage", "figure", *[LABELS[c] for c in configs]] + (["1→2 workers"] if both else [])
    lines = ["| " + " | ".join(head) + " |",
             "|---|---|" + "---:|" * (len(head) - 2)]
    stages = [f.stage for f in next(iter(results.values()))]

    def fig(c: str, s: str) -> Stage | None:
        return next((f for f in results[c] if f.stage == s), None)

    def mib(v: int) -> str:
        return f"{v / MiB:,.0f} MiB"

    def kind_cell(f: Stage, kind: str) -> str:
        if kind not in f.kinds:
            return "—"
        peak, n = f.kinds[kind]
        return mib(peak) + (f" (max of {n})" if n > 1 else "")

    for s in stages:
        # (figure, cell, the seconds its 1 -> 2 worker speed-up divides, or None)
        own = any(fig(c, s) and fig(c, s).stage_seconds is not None for c in configs)
        on = "stage" if own else "command"  # quality prints no seconds of its own
        rows: list[tuple[str, object, object]] = [
            ("command seconds", lambda f: f"{f.seconds:,.1f}", lambda f: f.seconds),
            *([("stage seconds", lambda f: f"{f.stage_seconds:,.1f}"
                if f.stage_seconds is not None else "—", lambda f: f.stage_seconds)]
              if own else []),
            (f"MB/s of binlog ({on})", lambda f: f"{size / 1e6 / _secs(f):,.1f}", _secs),
            (f"row changes/s ({on})", lambda f: f"{f.rows / _secs(f):,.0f}", _secs),
            ("cores busy", lambda f: f"{f.cores:.2f}", None),
            ("peak memory, processes summed", lambda f: mib(f.tree_peak), None),
        ]
        present = {k for c in configs if fig(c, s) for k in fig(c, s).kinds}
        for kind in KINDS:
            if kind in present:
                rows.append((f"peak RSS, {kind}", lambda f, k=kind: kind_cell(f, k), None))
        for name, cell, seconds in rows:
            cells = [cell(fig(c, s)) if fig(c, s) else "—" for c in configs]
            if both:
                one, two = fig("cluster-1", s), fig("cluster-2", s)
                a = seconds(one) if seconds and one else None
                b = seconds(two) if seconds and two else None
                cells.append(f"{a / b:.2f}x" if a and b else "")
            lines.append(f"| {s} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _secs(f: Stage) -> float:
    """The stage's own seconds where it prints them, else the command's."""
    return f.stage_seconds if f.stage_seconds else f.seconds


# -- main ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=10.0, help="GB of binlogs to generate")
    ap.add_argument("--files", type=int, default=40, help="in this many files")
    ap.add_argument("--workload", choices=("mixed", "narrow"), default="mixed")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--binlog-dir", help="the binlog files of DIR instead of generating")
    src.add_argument("--keep-binlogs", help="generate into DIR and keep it (for --binlog-dir)")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help=f"comma-separated subset of {','.join(CONFIGS)}")
    ap.add_argument("--stages", default="bronze,silver",
                    help="comma-separated: bronze,silver (the default) or bronze,silver,quality "
                         "(quality over every silver row: on the cluster nearly a stage more)")
    ap.add_argument("--executor-memory", default="3g",
                    help="each worker's memory and its executor's (spark.executor.memory)")
    ap.add_argument("--driver-memory", default="2g", help="spark.driver.memory")
    ap.add_argument("--results", help="a JSON file: each configuration's figures are written "
                    "to it as they are measured, and those of configurations not run now are "
                    "read from it into the table (the same input only)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory and lakes")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    stages = [s for s in args.stages.split(",") if s]
    if set(configs) - set(CONFIGS) or not configs:
        raise SystemExit(f"--configs: a subset of {','.join(CONFIGS)}")
    if stages not in (["bronze"], ["bronze", "silver"], ["bronze", "silver", "quality"]):
        raise SystemExit("--stages: bronze, bronze,silver or bronze,silver,quality")

    begun = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="binlake-bench-cluster-"))
    try:
        written = None
        if args.binlog_dir:
            binlog_dir = Path(args.binlog_dir).resolve()
        else:
            binlog_dir = Path(args.keep_binlogs).resolve() if args.keep_binlogs else \
                work / "binlogs"
            if binlog_dir.exists() and any(binlog_dir.iterdir()):
                raise SystemExit(f"{binlog_dir} is not empty: pass it as --binlog-dir")
            written, _ = generate(args.gb, args.files, binlog_dir, args.workload)
        paths = select_files(str(binlog_dir), all_files=True)
        if not paths:
            raise SystemExit(f"{binlog_dir}: no *.NNNNNN binlog files")
        size = sum(os.path.getsize(p) for p in paths)
        say(f"  input: {len(paths)} file(s), {size / 1e9:,.2f} GB ({size / 1e6:,.0f} MB)"
            + (f", {written:,} row changes written" if written is not None else ""))
        return _run(args, work, binlog_dir, size, configs, stages, written, begun)
    finally:
        if args.keep:
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _load(path: Path | None, size: int, files: int) -> dict:
    """Configurations measured by an earlier run on the same input (``--results``)."""
    if path is None or not path.exists():
        return {}
    import json

    saved = json.loads(path.read_text())
    if (saved.get("bytes"), saved.get("files")) != (size, files):
        raise SystemExit(f"--results {path}: measured on {saved.get('files')} files of "
                         f"{saved.get('bytes'):,} bytes, not this input's {files} of {size:,}")
    for entry in saved["configs"].values():
        entry["figures"] = [Stage(**{**f, "kinds": {k: tuple(v) for k, v in f["kinds"].items()}})
                            for f in entry["figures"]]
    return saved["configs"]


def _save(path: Path | None, size: int, files: int, done: dict) -> None:
    if path is None:
        return
    import dataclasses
    import json

    path.write_text(json.dumps({"bytes": size, "files": files, "configs": {
        c: {**e, "figures": [dataclasses.asdict(f) for f in e["figures"]]}
        for c, e in done.items()}}, indent=1))


def _run(args, work: Path, binlog_dir: Path, size: int, configs: list[str],
         stages: list[str], written: int | None, begun: float) -> int:
    n_files = len(select_files(str(binlog_dir), all_files=True))
    results_path = Path(args.results).resolve() if args.results else None
    done = {c: e for c, e in _load(results_path, size, n_files).items() if c not in configs}
    if done:
        say(f"  from {results_path}: {', '.join(LABELS[c] for c in done)}")
    for i, config in enumerate(configs, start=2):
        say(f"{i}. {LABELS[config]}")
        lake, logs = work / f"lake-{config}", work / f"logs-{config}"
        logs.mkdir(parents=True)
        started = time.perf_counter()
        if config == "embedded":
            figures = run_embedded(lake, binlog_dir, stages, logs)
        else:
            figures, _ = run_cluster(int(config.split("-")[1]), lake, binlog_dir, stages,
                                     logs, args)
        wall = time.perf_counter() - started
        by = {f.stage: f.rows for f in figures}
        table_rows = silver_table_rows(lake) if "silver" in by else None
        counts = [v for v in (by.get("bronze"), by.get("silver"), table_rows,
                              by.get("quality")) if v is not None]
        say(f"  row changes: bronze {by.get('bronze', 0):,}"
            + (f", silver appended {by['silver']:,}" if "silver" in by else "")
            + (f", silver table {table_rows:,}" if table_rows is not None else "")
            + (f", quality checked {by['quality']:,}" if "quality" in by else "")
            + f"; {wall:,.1f} s in all")
        done[config] = {"figures": figures, "counts": counts, "wall": wall}
        _save(results_path, size, n_files, done)
        if not args.keep:
            shutil.rmtree(lake, ignore_errors=True)
    shown = [c for c in CONFIGS if c in done]
    say("")
    say(f"{size / 1e9:,.2f} GB of binlogs ({size:,} bytes) in {n_files} files; stages "
        f"{', '.join(f.stage for f in done[shown[0]]['figures'])}; "
        + ", ".join(f"{LABELS[c]} {done[c]['wall']:,.0f} s" for c in shown)
        + f"; this run {time.perf_counter() - begun:,.0f} s in all")
    say("")
    say(table({c: done[c]["figures"] for c in shown}, size))
    counts = {c: tuple(done[c]["counts"]) for c in shown}
    every = {v for c in counts.values() for v in c} | ({written} if written is not None else set())
    if len(every) != 1:
        say(f"\nMISMATCH: row changes per configuration (bronze, silver, silver table, "
            f"quality): {counts}" + (f"; written {written:,}" if written is not None else ""))
        return 1
    say(f"\nrow changes: {every.pop():,} in bronze, silver and the silver table of every "
        "configuration" + (", as the workload wrote them" if written is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
