"""``binlake bronze`` on the command line: its parser and its handler (``pipelines.command``).

``binlake index`` takes the same arguments and runs the handler first;
``python -m pipelines.bronze`` runs the same command on its own.
"""

from __future__ import annotations

import argparse
from typing import Callable

from pipelines.command import csv_list
from pipelines.config import Config
from pipelines.errors import BinlakeError, ConfigError

__all__ = ["HELP", "add_parser", "add_bronze_arguments", "cmd_bronze"]

HELP = "decode binlog files into the bronze Delta table"


def add_parser(sub) -> None:
    """Add ``bronze`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("bronze", help=HELP)
    add_bronze_arguments(p)
    p.set_defaults(handler=cmd_bronze)


def add_bronze_arguments(p: argparse.ArgumentParser) -> None:
    """The binlog files to index (``binlake bronze`` and ``binlake index``)."""
    p.add_argument("--binlog-dir", required=True,
                   help="directory holding the binlog files, or s3://bucket/prefix (read in "
                        "place with the [storage] settings)")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--all", action="store_true",
                     help="the directory's binlogs in server order: those its <base>.index "
                          "lists, else the *.NNNNNN files that begin with the binlog magic")
    sel.add_argument("--files", type=csv_list, help="comma-separated file names")
    p.add_argument("--schemas", type=csv_list, help="only these schemas' row changes")
    p.add_argument("--tables", type=csv_list, help="only these schema.table row changes")
    p.add_argument("--source", help="source name written as source_id (default from conf)")


def cmd_bronze(args: argparse.Namespace, cfg: Config,
               on_todo: Callable[[list[str]], None] | None = None) -> int:
    """Index the binlog files ``args`` name into bronze; one line per file and a summary.
    ``on_todo``: called with the files left to decode, before decoding (``binlake index``)."""
    from pipelines.bronze.job import run_bronze
    from pipelines.lake.tables import BRONZE_EVENTS, Lake
    from pipelines.engine.session import get_spark

    paths = _binlog_paths(args, cfg)
    _start_decoders(cfg, paths)
    spark = get_spark(cfg.engine)
    res = run_bronze(spark, cfg, binlog_dir=args.binlog_dir, all_files=args.all,
                     files=args.files, schemas=args.schemas, tables=args.tables,
                     on_todo=on_todo)
    for f in res.files:
        line = (f"bronze: {f.binlog_file}: {f.status}, {f.events or 0} events, "
                f"{f.row_changes or 0} row changes, last pos {f.last_pos}")
        if f.error:
            line += f" ({f.error})"
        print(line)
    for name in res.skipped:
        print(f"bronze: {name}: already completed, skipped")
    for name in _retract_not_binlogs(spark, cfg, args.binlog_dir):
        print(f"bronze: {name}: not a binlog: the failed entry an older run left retracted")
    if res.compacted:
        c = res.compacted
        print(f"bronze: bronze/files compacted: {c.rows_before} -> {c.rows_after} rows "
              f"for {c.files} file(s)")
    rate = res.row_changes / res.seconds if res.seconds else 0.0
    print(f"bronze: {len(res.files)} file(s), {res.row_changes} row changes in "
          f"{res.seconds:.1f}s ({rate:,.0f}/s) -> {Lake.of(cfg).where(BRONZE_EVENTS)}")
    return 1 if res.failed else 0


def _binlog_paths(args: argparse.Namespace, cfg: Config) -> list[str]:
    """The files a bronze run will consider. A :class:`ConfigError` (no such directory, a
    ``--files`` name that is not a binlog) is raised here, before the engine starts or the
    lake is touched; empty when the directory cannot be listed otherwise (the run itself
    reports why)."""
    from pipelines.bronze.files import select_files

    try:
        return select_files(args.binlog_dir, all_files=args.all, names=args.files,
                            storage=cfg.storage)
    except ConfigError:
        raise
    except (BinlakeError, OSError):
        return []


def _retract_not_binlogs(spark, cfg: Config, binlog_dir: str) -> list[str]:
    """The files an older run indexed that are not binlogs, their entries retracted
    (``not_binlogs.py``; the ``bronze`` lease is taken only when there are some)."""
    from pipelines.bronze.not_binlogs import retract_not_binlogs, stale_entries

    if not stale_entries(spark, cfg, binlog_dir):
        return []
    return retract_not_binlogs(spark, cfg, binlog_dir=binlog_dir)


def _start_decoders(cfg: Config, paths: list[str]) -> None:
    """Before the engine starts: the decoding workers' server boots on the other core while
    this process imports the Connect client and starts the engine (docs/performance.md)."""
    from pipelines.bronze.job import start_decoders

    if paths:
        start_decoders(cfg, paths, here=cfg.engine.kind == "sail" and not cfg.engine.remote)
