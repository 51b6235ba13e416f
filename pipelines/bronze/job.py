"""The bronze stage: decode binlog files in parallel on the engine and write the bronze table.

Only I/O and orchestration live here; decoding is ``decode_task``/``records`` (pure).

Exactly once per file: the files of a run are marked ``in_progress``, their old bronze rows
are deleted (partition-level, metadata only), the decoded rows are appended, one Delta commit
per ``bronze.commit_mb`` of binlog (the engine's memory bound, :func:`plan_commits`), then the
outcome of each file is recorded. A crash anywhere leaves the files ``in_progress`` (silver
skips those); the next run deletes whatever they had and decodes them again, so each row
change is in bronze exactly once after any re-run.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable


from pipelines.binlog import store as binlog_store
from pipelines.binlog.fast import rowkernel
from pipelines.bronze.decode_task import decode_file_batches, decoders
from pipelines.bronze.excluded import drop_schemas, excluded_schemas
from pipelines.bronze.files import (Compacted, FileState, compact_states, load_states, megabytes,
                                   save_states, select_files)
from pipelines.binlog.reader import chunk_start
from pipelines.bronze.records import BRONZE_DDL
from pipelines.config import Config
from pipelines.lake.delta_log import read_log
from pipelines.lake.delta_ops import commit_bytes, files_in_partitions, sql_string
from pipelines.lake.few_files import keep_few_files
from pipelines.lake.tables import BRONZE_EVENTS, BRONZE_FILES, Lake
from pipelines.lake.lease import holds_lease
from pipelines.engine.memory import release_freed_memory
from pipelines.engine.session import engine_cores, engine_name
from pipelines.lake.task_files import ADDED_DDL, FileSpec, write_files
from pipelines.engine.workers import forkserver_is_safe
from pipelines.vocabulary import CHANGE_TYPES_SQL

__all__ = ["BronzeResult", "run_bronze", "decode_files", "filter_tables", "BRONZE_PARTITIONS",
           "TASKS_DDL", "plan_chunks", "plan_commits", "start_decoders", "task_frame"]

log = logging.getLogger(__name__)

# Partitioned by file: a file's rows are replaced as a unit (metadata-only delete) when it is
# re-indexed, readers prune by file, and a binlog file (max_binlog_size, 1 GB by default) is a
# sensible partition size.
BRONZE_PARTITIONS = list(BRONZE_EVENTS.partition_by)
TASKS_DDL = "path string, source_id string, chunk int, chunks int"
_TASK_FIELDS = [field.split() for field in TASKS_DDL.split(", ")]  # (name, type) each


@dataclass
class BronzeResult:
    files: list[FileState] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    compacted: Compacted | None = None  # bronze/files compacted at the end of the run

    @property
    def row_changes(self) -> int:
        return sum(f.row_changes or 0 for f in self.files)

    @property
    def failed(self) -> list[FileState]:
        """The files that stopped with an error, and closed files cut short (``partial``
        with the note :func:`records.truncated_note` writes): the run exits 1 for them."""
        return [f for f in self.files if f.status == "failed"
                or (f.status == "partial" and (f.error or "").startswith("partial: "))]


def _decode_partition(cfg: Config, compiled: bool = False, in_workers: bool = True,
                      files: FileSpec | None = None):
    """The mapInArrow function: (path, source_id) rows → bronze batches; ``compiled``: rows
    decoded by the compiled loop (``rowkernel``); ``in_workers``: in worker processes
    (``bronze.decode_in_subprocess``), else in the task's own process; ``files``: the
    batches written as bronze's data files by the task (``task_files``), a row per file."""
    b = cfg.bronze
    server_uuid = cfg.source.server_uuid or None
    excluded = excluded_schemas(cfg)  # gold's own database on the source server (excluded)

    def run(batches):
        if files is not None:
            yield from write_files(files)(decoded(batches))
        else:
            yield from decoded(batches)

    def decoded(batches):
        for tasks in batches:
            cols = [tasks.column(i).to_pylist() for i in range(4)]
            for path, source_id, chunk, chunks in zip(*cols):
                for batch in decode_file_batches(
                        path, source_id=source_id, server_uuid=server_uuid,
                        batch_rows=b.batch_rows, checksum=b.checksum,
                        subprocess=in_workers, chunk=chunk or 0, chunks=chunks or 1,
                        start_at=_start_at(path, chunk or 0, chunks or 1, cfg.storage),
                        statement_text=b.statement_text, columnar=compiled,
                        storage=cfg.storage if binlog_store.is_remote(path) else None):
                    yield drop_schemas(batch, excluded)

    return run


def _start_at(path: str, chunk: int, chunks: int, storage: object | None = None) -> int:
    """Where chunk ``chunk`` may begin framing (``reader.chunk_start``); 4 (the file's start,
    the reader then reports the problem) when the file cannot be read here."""
    try:
        return chunk_start(path, chunk, chunks, storage)
    except OSError:
        return 4


def decode_files(tasks, cfg: Config, compiled: bool = False, in_workers: bool | None = None,
                 files: FileSpec | None = None):
    """Pure transform: a DataFrame of ``TASKS_DDL`` rows → bronze rows (``BRONZE_DDL``).

    A task row is a file, or one chunk of a file split among tasks (``reader.py``); each
    chunk's rows end with its closing END/ERROR row. ``compiled``: rows decoded by the
    compiled loop (the same rows, docs/bronze.md). ``in_workers``: decode in worker processes
    (``None``: ``bronze.decode_in_subprocess``). ``files`` (``Lake.file_spec``): the tasks
    write the rows as bronze's data files, and the DataFrame is of those files
    (``task_files.ADDED_DDL``, for ``Lake.commit_files``).
    """
    if in_workers is None:
        in_workers = cfg.bronze.decode_in_subprocess
    return tasks.mapInArrow(_decode_partition(cfg, compiled, in_workers, files),
                            BRONZE_DDL if files is None else ADDED_DDL)


def _in_workers(cfg: Config, paths: list[str]) -> bool:
    """Whether a run decoding ``paths`` uses worker processes: when asked
    (``bronze.decode_in_subprocess``) and the files hold at least ``bronze.inline_max_mb``
    (below it, starting a worker costs more than the decoding it would take over)."""
    return (cfg.bronze.decode_in_subprocess
            and megabytes(paths, cfg.storage) >= cfg.bronze.inline_max_mb)


def start_decoders(cfg: Config, paths: list[str], *, here: bool) -> bool:
    """Prepare decoding ``paths``; whether rows are decoded by the compiled row loop (the
    files hold at least ``bronze.compiled_min_mb``). ``here``: the engine runs the decoding
    tasks in this process (the embedded engine): then the worker processes' server starts
    now when the run will use it, with that loop loaded, instead of when the first task needs
    a worker. The files already indexed count too (they are not known yet; a wasted start
    costs only the server's own process). ``binlake bronze``/``index`` call it before
    starting the engine, so that the server boots on the other core meanwhile;
    :func:`run_bronze` calls it again (a no-op then)."""
    compiled = (rowkernel.installed()
                and megabytes(paths, cfg.storage) >= cfg.bronze.compiled_min_mb)
    if here and _in_workers(cfg, paths) and forkserver_is_safe():
        decoders(row_kernel=compiled, start=True)
    return compiled


def task_frame(spark, tasks: list[tuple[str, str, int, int]], partitions: int):
    """The decoding tasks (``TASKS_DDL`` rows) as a DataFrame of ``partitions`` partitions
    holding as many tasks each, give or take one, in order, without a shuffle: ``range``
    makes the partitions and each row picks its task by its id.

    Not ``repartition(partitions)``: JVM Spark deals rows round robin from a start drawn per
    input partition, so the two chunks of one file landed in one partition (one core decoded
    both, then wrote one file that silver read with one task; 8 tasks filled 4 of 8
    partitions), and ``repartitionByRange`` does the same on Sail (measured on both)."""
    from pyspark.sql import functions as F

    at = (F.col("id") + 1).cast("int")
    return spark.range(0, len(tasks), 1, max(partitions, 1)).select(*[
        F.element_at(F.array(*[F.lit(task[i]) for task in tasks]), at).cast(kind).alias(name)
        for i, (name, kind) in enumerate(_TASK_FIELDS)])


def with_file_literals(decoded, source_id: str, paths: list[str]):
    """``decoded`` (the rows of the tasks of ``paths``) with its partition columns as literals
    where the tasks read one file: every row of a task carries the run's ``source_id`` and its
    file's name (``decode_task``), and an engine writing a partitioned table whose partition
    values are literals does not sort the rows by them first (Sail's sort held every row of
    the commit and copied it twice: docs/performance.md, Bronze decode)."""
    names = {os.path.basename(p) for p in paths}
    if len(names) != 1:
        return decoded
    from pyspark.sql import functions as F

    return (decoded.withColumn("source_id", F.lit(source_id))
            .withColumn("binlog_file", F.lit(names.pop())))


def filter_tables(df, schemas: list[str] | None, tables: list[str] | None):
    if not schemas and not tables:
        return df
    keep = ["event_type IN ('QUERY', 'END', 'ERROR')"]
    if schemas:
        keep.append("schema_name IN (" + ", ".join(sql_string(s) for s in schemas) + ")")
    if tables:
        pairs = []
        for t in tables:
            s, _, n = t.partition(".")
            pairs.append(f"(schema_name = {sql_string(s)} AND table_name = {sql_string(n)})")
        keep.append("(" + " OR ".join(pairs) + ")")
    return df.where(" OR ".join(keep))


@holds_lease("bronze")
def run_bronze(spark, cfg: Config, *, binlog_dir: str, all_files: bool = False,
               files: list[str] | None = None, schemas: list[str] | None = None,
               tables: list[str] | None = None,
               on_todo: Callable[[list[str]], None] | None = None) -> BronzeResult:
    """Index the chosen files into ``<lake>/bronze/binlog_events``; see the module docstring.
    ``on_todo``: called with the paths this run will decode (not those already indexed)
    before it decodes them (``binlake index`` starts loading silver's loops there)."""
    started = time.monotonic()
    source_id = cfg.source.name
    lake = Lake.of(cfg)
    paths = select_files(binlog_dir, all_files=all_files, names=files, storage=cfg.storage)
    sizes = {p: binlog_store.size(p, cfg.storage) for p in paths}
    compiled = start_decoders(cfg, paths, here=engine_name() == "sail")
    states = load_states(spark, lake)
    todo, result = [], BronzeResult()
    for path in paths:
        name = os.path.basename(path)
        st = states.get((source_id, name))
        if st is not None and st.status == "streaming":
            result.skipped.append(name)  # being written by `binlake stream` (docs/stream.md)
            continue
        if st is not None and st.status == "completed" and st.size == sizes[path]:
            result.skipped.append(name)
            continue
        todo.append(path)
    if not todo:
        result.compacted = compact_states(spark, lake, strict=False)
        result.seconds = time.monotonic() - started
        return result
    for path in todo:
        name = os.path.basename(path)
        states[(source_id, name)] = FileState(source_id, name, binlog_store.absolute(path),
                                              sizes[path], "in_progress")
    mine = [(source_id, os.path.basename(p)) for p in todo]
    save_states(spark, lake, [states[k] for k in mine])

    names = [os.path.basename(p) for p in todo]
    in_list = ", ".join(sql_string(n) for n in names)
    if lake.exists(spark, BRONZE_EVENTS) and _may_hold(spark, lake, source_id, names,
                                                       cfg.storage):
        lake.delete_where(spark, BRONZE_EVENTS,
                          f"source_id = {sql_string(source_id)} AND binlog_file IN ({in_list})")

    in_workers = _in_workers(cfg, todo)
    if not in_workers:  # decoded in this process: the loop only if loaded or worth loading
        compiled = compiled and (rowkernel.warmed()
                                 or megabytes(todo, cfg.storage) >= cfg.bronze.compiled_min_mb)
    if on_todo is not None:
        on_todo(todo)
    cores = cfg.bronze.parallelism or engine_cores(spark)
    # binlake's tasks write the data files where they can (Lake.file_spec), unless tables
    # are filtered (the engine filters the decoded rows then)
    files = None if schemas or tables else \
        lake.file_spec(spark, BRONZE_EVENTS, cfg.bronze.target_file_mb,
                       embedded=engine_name() == "sail")
    commit = commit_bytes(spark, cfg.bronze.commit_mb, engine_writes=files is None)
    plan = plan_chunks(todo, cores, cfg.bronze.min_chunk_mb << 20, commit, sizes=sizes)
    for wave in plan_commits(plan, commit):
        tasks = task_frame(spark, [(binlog_store.absolute(p), source_id, c, n)
                                   for p, c, n, _ in wave],
                           min(len(wave), cores))
        if files is not None:
            lake.commit_files(BRONZE_EVENTS, decode_files(tasks, cfg, compiled, in_workers,
                                                          files))
            release_freed_memory()
            continue
        decoded = filter_tables(decode_files(tasks, cfg, compiled, in_workers),
                                schemas, tables)
        if lake.takes_literals(spark, BRONZE_EVENTS):
            decoded = with_file_literals(decoded, source_id, [p for p, _, _, _ in wave])
        lake.append(decoded, BRONZE_EVENTS, target_mb=cfg.bronze.target_file_mb)
        release_freed_memory()

    outcome = _outcomes(spark, lake.ident(BRONZE_EVENTS), source_id, in_list)
    followed = _followed_by_later_file(binlog_dir, todo, cfg.storage)
    for path in todo:
        name = os.path.basename(path)
        st = states[(source_id, name)]
        st.updated_at = None
        got = outcome.get(name)
        if got is None:
            st.status, st.error = "failed", "no closing row written (decoder task lost)"
            continue
        etype, pos, info, row_changes = got
        st.row_changes = row_changes
        st.last_pos = pos
        st.events = info.get("events")
        if etype == "ERROR":
            st.status, st.error = "failed", info.get("error")
        elif info.get("missing_chunks"):
            st.status = "failed"
            st.error = f"decoding task(s) lost for chunk(s) {info['missing_chunks']}"
        elif info.get("truncated"):  # a closed file cut short: its events up to pos are in
            st.status, st.error = "partial", info.get("note")
        elif info.get("closed") or path in followed:
            # Closed by ROTATE/STOP, or a later file exists (the server restarted after a
            # crash): nothing more will be written to it.
            st.status, st.error = "completed", None
        else:
            st.status, st.error = "partial", info.get("note")
    save_states(spark, lake, [states[k] for k in mine])
    result.compacted = compact_states(spark, lake, strict=False)  # under this run's lease
    keep_few_files(spark, lake, BRONZE_FILES)
    result.files = [states[(source_id, os.path.basename(p))] for p in todo]
    result.seconds = time.monotonic() - started
    return result


def _may_hold(spark, lake: Lake, source_id: str, names: list[str],
              storage: object | None = None) -> bool:
    """Whether ``bronze/binlog_events`` may hold rows of the files ``names`` (indexed before,
    or by a run killed after it wrote some, or by the stream): False only when the Delta log
    lists no data file in their partitions. A file indexed for the first time then needs no
    DELETE, which on the embedded engine is a query over the table's log (~50 ms once the
    lake holds a history, docs/performance.md, Optimize and the small tables). The log's listing
    (``delta_log``, every file naming both partition columns), else delta-rs file pruning."""
    where = lake.location(spark, BRONZE_EVENTS)
    if not where:
        return True
    log = read_log(where, storage)
    if log is not None and log.files is not None and all(
            "source_id" in f.partition and "binlog_file" in f.partition for f in log.files):
        wanted = set(names)
        return any(f.partition["source_id"] == source_id and f.partition["binlog_file"] in wanted
                   for f in log.files)
    found = files_in_partitions(where, [("source_id", "=", source_id),
                                        ("binlog_file", "in", names)])
    return found is None or found > 0


def _followed_by_later_file(binlog_dir: str, paths: list[str], storage: object | None = None
                            ) -> set[str]:
    """The paths for which a later-numbered binlog file exists in the same directory."""
    numbered = select_files(binlog_dir, all_files=True, storage=storage)
    index = {binlog_store.absolute(p): i for i, p in enumerate(numbered)}
    last = len(numbered) - 1
    return {p for p in paths if index.get(binlog_store.absolute(p), last + 1) < last}


def plan_chunks(paths: list[str], cores: int, min_chunk_bytes: int, commit_bytes: int = 0,
                sizes: dict[str, int] | None = None) -> list[tuple[str, int, int, int]]:
    """(path, chunk, chunks, bytes) decoding tasks: a file is split among idle cores when
    fewer files than cores are indexed, in chunks of at least ``min_chunk_bytes``; with
    ``commit_bytes``, also into chunks of at most ``commit_bytes / cores`` (at least
    ``min_chunk_bytes``), so that one commit of ``cores`` chunks stays within it."""
    per_file = max(1, cores // max(len(paths), 1))
    min_chunk = max(min_chunk_bytes, 1)
    out = []
    for p in paths:
        size = sizes[p] if sizes is not None else os.path.getsize(p)
        n = max(1, min(per_file, size // min_chunk))
        if commit_bytes > 0:
            most = max(commit_bytes // max(cores, 1), min_chunk)
            n = max(n, -(-size // most))
        out += [(p, c, n, size // n) for c in range(n)]
    return out


def plan_commits(plan: list[tuple[str, int, int, int]], commit_bytes: int
                 ) -> list[list[tuple[str, int, int, int]]]:
    """The tasks of ``plan`` in order, grouped into commits of at most ``commit_bytes`` of
    binlog each (a bigger task alone; ``0``: one commit).

    Why: Sail's Delta writer holds a partitioned write's rows until the write ends, so the
    engine's memory follows one commit's rows; committing every ``bronze.commit_mb`` of
    binlog bounds it by that instead of by the files' size (docs/performance.md). Unset, it
    bounds commits only on such an engine (``delta_ops.commit_bytes``). Exactly
    once is kept: the files stay ``in_progress`` until their last commit, and a re-run
    deletes whatever an interrupted run had committed.
    """
    if commit_bytes <= 0:
        return [plan] if plan else []
    waves: list[list[tuple[str, int, int, int]]] = []
    size = 0
    for task in plan:
        if waves and size + task[3] <= commit_bytes:
            waves[-1].append(task)
            size += task[3]
        else:
            waves.append([task])
            size = task[3]
    return waves


def _outcomes(spark, bronze: str, source_id: str, in_list: str) -> dict:
    """Per file: (closing type, position, merged closing info, row changes) from bronze.

    A file decoded in chunks has one closing row per chunk: it failed if any chunk failed
    (the first failing chunk's error and position), its end is the last chunk's.
    """
    where = (f"source_id = {sql_string(source_id)} AND binlog_file IN ({in_list})")
    closing = spark.sql(
        "SELECT binlog_file, event_type, start_pos, row_in_event, query "
        f"FROM {bronze} WHERE {where} AND event_type IN ('END', 'ERROR')"
    ).collect()
    counts = {r["binlog_file"]: int(r["n"]) for r in spark.sql(
        f"SELECT binlog_file, count(*) AS n FROM {bronze} WHERE {where} "
        f"AND event_type IN {CHANGE_TYPES_SQL} GROUP BY binlog_file").collect()}
    per_file: dict[str, list] = {}
    for r in closing:
        info = json.loads(r["query"]) if r["query"] else {}
        per_file.setdefault(r["binlog_file"], []).append(
            (info.get("chunk", r["row_in_event"]), r["event_type"], r["start_pos"], info))
    out = {}
    for name, parts in per_file.items():
        parts.sort(key=lambda p: p[0])
        chunks = parts[0][3].get("chunks", 1)
        merged = dict(parts[-1][3])
        merged["events"] = sum(p[3].get("events") or 0 for p in parts)
        missing = sorted(set(range(chunks)) - {p[0] for p in parts})
        if missing:
            merged["missing_chunks"] = missing
        failed = [p for p in parts if p[1] == "ERROR"]
        if failed:
            first = failed[0]
            merged["error"] = first[3].get("error")
            out[name] = ("ERROR", first[2], merged, counts.get(name, 0))
        else:
            out[name] = ("END", parts[-1][2], merged, counts.get(name, 0))
    return out
