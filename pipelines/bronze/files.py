"""Which binlog files to index, and the per-file progress table ``<lake>/bronze/files``.

Statuses: ``in_progress`` (a run started it and has not recorded an outcome: the next run
redoes it), ``completed`` (decoded to a closing ROTATE/STOP), ``partial`` (decoded to the last
complete event of a file that may still be written: the next run redoes it to pick up the
rest), ``failed`` (decoding stopped with ``error``; the rows before it are in bronze and the
next run redoes the file).

The table is append-only: every save appends one row per file it changes, and a file's state
is its latest row (``updated_at``). Two writers that save at once (a `binlake bronze` and a
`binlake stream`, or two runs racing without their lease) therefore never overwrite each
other's files: each append lands as its own commit. ``dropped`` rows retract a file (older
streams wrote them when taking a file over; the stream now marks such files ``streaming``).

Compaction (:func:`compact_states`): once the table holds more than ``COMPACT_FACTOR`` rows
per file plus ``COMPACT_SLACK``, a writer holding the ``bronze`` lease deletes every row that
a later row of the same file supersedes (older rows stay in Delta's time travel). It is a
``DELETE`` of exactly those rows, not an overwrite: the stream appends its rows without the
``bronze`` lease, and a DELETE commit removes only the data files it read, so a row appended
meanwhile survives (docs/concurrency.md). Each commit is atomic: a kill -9 leaves either the
old or the compacted table, both with every file's latest row.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import re
import time
from dataclasses import asdict, dataclass

from pipelines.binlog import store as binlog_store
from pipelines.binlog.directory import check_binlog, list_binlogs
from pipelines.binlog.framing import MAGIC
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError
from pipelines.lake.tables import BRONZE_FILES, Lake

__all__ = ["FileState", "FILES_DDL", "DROPPED", "select_files", "megabytes", "load_states",
           "save_states", "latest_states", "Compacted", "compact_states", "superseded_keys",
           "compaction_due"]

log = logging.getLogger(__name__)

DROPPED = "dropped"

COMPACT_FACTOR = 2  # a bronze run leaves two rows per file (in_progress, then its outcome)
COMPACT_SLACK = 100
COMPACT_BATCH = 20_000  # superseded rows per DELETE commit (the predicate's IN list)
COMPACT_ATTEMPTS = 5
# Worth another attempt: a DELETE that lost its commit to a concurrent one (Sail's and
# delta-spark's words), or a log read that met a concurrent writer's checkpoint half written
# (Sail: "Missing commit file: expected version 0, found N").
_RETRY = re.compile(r"Failed to commit transaction|Concurrent\w*Exception|"
                    r"DELTA_CONCURRENT_\w+|Missing commit file")
# One row's identity: its file and its updated_at (microseconds, time-zone free).
_ROW_KEY = ("concat_ws('/', source_id, binlog_file, "
            "CAST(unix_micros(updated_at) AS STRING))")

FILES_DDL = BRONZE_FILES.ddl()


@dataclass
class FileState:
    source_id: str
    binlog_file: str
    path: str
    size: int
    status: str
    events: int | None = None
    row_changes: int | None = None
    last_pos: int | None = None
    error: str | None = None
    updated_at: dt.datetime | None = None


def select_files(binlog_dir: str, *, all_files: bool = False,
                 names: list[str] | None = None, storage: object | None = None) -> list[str]:
    """Paths to index: ``--all`` takes the directory's binlogs in server order (its index
    file's, else the files beginning with the binlog magic: ``binlog_dir.list_binlogs``, so a
    file that is not a binlog is left out); ``--files`` as given, each of which must be a
    binlog (a :class:`ConfigError` names the one that is not). ``binlog_dir`` may be an
    ``s3://`` URL (``binlog_store``; ``storage``: the ``[storage]`` settings)."""
    if binlog_store.is_remote(binlog_dir):
        return _select_remote(binlog_dir, all_files, names, storage)
    if not os.path.isdir(binlog_dir):
        raise ConfigError(f"--binlog-dir {binlog_dir}: not a directory")
    if all_files == bool(names):
        raise ConfigError("give exactly one of --all or --files")
    if all_files:
        return list_binlogs(binlog_dir)
    out = []
    for n in names or []:
        path = n if os.path.isabs(n) else os.path.join(binlog_dir, n)
        check_binlog(path)
        out.append(path)
    return out


def _select_remote(binlog_dir: str, all_files: bool, names: list[str] | None,
                   storage: object | None) -> list[str]:
    if all_files == bool(names):
        raise ConfigError("give exactly one of --all or --files")
    if all_files:
        return binlog_store.remote_binlogs(binlog_dir, storage)
    objects = binlog_store.list_objects(binlog_dir, storage)
    out = []
    for n in names or []:
        path = binlog_store.join(binlog_dir, n)
        if n not in objects:
            raise ConfigError(f"--files: {path} does not exist")
        first = binlog_store.head(path, len(MAGIC), storage)
        if first != MAGIC:
            raise ConfigError(f"--files: {path} is not a binlog (it begins with "
                              f"0x{first.hex()}, a binlog with 0xfe62696e)")
        out.append(path)
    return out


def megabytes(paths: list[str], storage: object | None = None) -> float:
    """The files' size in MiB (a file that cannot be read counts 0: its run reports it)."""
    total = 0
    for path in paths:
        try:
            total += binlog_store.size(path, storage)
        except OSError:
            pass
    return total / 2**20


def load_states(spark, lake: Lake) -> dict[tuple[str, str], FileState]:
    """Every file's latest recorded state, keyed by (source_id, binlog_file)."""
    if not lake.exists(spark, BRONZE_FILES):
        return {}
    out: dict[tuple[str, str], FileState] = {}
    for r in lake.read(spark, BRONZE_FILES).collect():
        st = FileState(**r.asDict())
        key = (st.source_id, st.binlog_file)
        old = out.get(key)
        if old is None or (st.updated_at or dt.datetime.min) >= (old.updated_at or dt.datetime.min):
            out[key] = st
    return {k: v for k, v in out.items() if v.status != DROPPED}


def latest_states(df):
    """Pure transform: the table's rows → each file's latest row, ``dropped`` ones left out."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("source_id", "binlog_file").orderBy(F.col("updated_at").desc())
    return (df.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")
            .where(F.col("status") != DROPPED))


def save_states(spark, lake: Lake, states) -> None:
    """Append the given files' states (an iterable of :class:`FileState`, or a dict of them)
    in one commit; files not given keep their latest row."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    values = states.values() if isinstance(states, dict) else states
    rows = []
    for st in sorted(values, key=lambda s: (s.source_id, s.binlog_file)):
        if st.updated_at is None:
            st.updated_at = now
        rows.append(tuple(asdict(st).values()))
    if rows:
        lake.append(spark.createDataFrame(rows, FILES_DDL), BRONZE_FILES)


@dataclass
class Compacted:
    """What :func:`compact_states` did: rows before and after, live files, DELETE commits."""

    rows_before: int
    rows_after: int
    files: int
    commits: int


def compaction_due(rows: int, files: int, *, force: bool = False) -> bool:
    """Pure rule: compact past ``COMPACT_FACTOR`` rows per file + ``COMPACT_SLACK`` (``force``:
    whenever any file has more than one row)."""
    return rows > files if force else rows > COMPACT_FACTOR * files + COMPACT_SLACK


def superseded_keys(df):
    """Pure transform: the table's rows → the ``key`` of every row a later row of the same
    file supersedes (rows without ``updated_at`` are kept)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("source_id", "binlog_file")
    t = F.unix_micros("updated_at")
    return (df.withColumn("_t", t).withColumn("_latest", F.max("_t").over(w))
            .where(F.col("_t") < F.col("_latest")).select(F.expr(_ROW_KEY).alias("key")))


def compact_states(spark, lake: Lake, *, force: bool = False, strict: bool = True,
                   attempts: int = COMPACT_ATTEMPTS) -> Compacted | None:
    """Delete superseded rows when :func:`compaction_due` (module docstring); ``None`` when
    nothing was due, or when every attempt lost its commit to a concurrent writer (the engine
    refuses a DELETE that races an append; compaction is left to the next run, a warning
    says so). The caller holds the ``bronze`` lease (one compactor at a time). Not
    ``strict`` (a bronze run, the stream: compaction is their side task): any other error is
    a warning too, and the table is as it was (each DELETE commit is atomic)."""
    try:
        return _compact(spark, lake, force, attempts)
    except Exception as exc:  # noqa: BLE001 - the engines raise many kinds
        if strict:
            raise
        first = (str(exc).strip().splitlines() or [repr(exc)])[0][:300]
        log.warning("bronze/files: compaction failed, left to the next run: %s", first)
        return None


def _compact(spark, lake: Lake, force: bool, attempts: int) -> Compacted | None:
    """:func:`_compact_once`, again (after a short random pause) while it meets a concurrent
    writer (``_RETRY``)."""
    for attempt in range(attempts):
        try:
            return _compact_once(spark, lake, force)
        except Exception as exc:  # noqa: BLE001 - each engine words a lost commit its own way
            if not _RETRY.search(str(exc)):
                raise
            met = str(exc).strip().splitlines()[0][:200]
            log.info("bronze/files: compaction attempt %d met a concurrent writer (%s)",
                     attempt + 1, met)
            time.sleep(random.uniform(0.1, 0.5) * (attempt + 1))
    log.warning("bronze/files: compaction gave up after %d attempts, each met a concurrent "
                "writer (%s); the next bronze run or `binlake optimize` compacts it",
                attempts, met)
    return None


def _compact_once(spark, lake: Lake, force: bool) -> Compacted | None:
    if not lake.exists(spark, BRONZE_FILES):
        return None
    ident = lake.ident(BRONZE_FILES)
    count = f"SELECT count(*), count(DISTINCT source_id, binlog_file) FROM {ident}"
    rows, files = spark.sql(count).first()
    if not compaction_due(rows, files, force=force):
        return None
    keys = [r[0] for r in superseded_keys(lake.read(spark, BRONZE_FILES)).collect()]
    commits = 0
    for i in range(0, len(keys), COMPACT_BATCH):  # each DELETE leaves every latest row
        in_list = ", ".join(sql_string(k) for k in keys[i:i + COMPACT_BATCH])
        lake.delete_where(spark, BRONZE_FILES, f"{_ROW_KEY} IN ({in_list})")
        commits += 1
    after = spark.sql(f"SELECT count(*) FROM {ident}").first()[0]
    return Compacted(rows, after, files, commits)
