"""The ``binlake`` command line.

``binlake [--lake DIR] [--conf FILE] [--spark-remote sc://HOST:PORT] [--engine KIND] COMMAND``

Commands: ``decode`` (print a binlog's events), ``bronze`` (decode files into the bronze Delta
table), ``snapshot`` (schema snapshot of the source), ``silver`` (name row changes), ``index``
(every stage, in order), ``init``/``gold``/``rotate``/``vacuum`` (the MySQL gold table),
``stream`` (follow a live server), ``status``, ``sql``, ``query``/``reconstruct``/``flashback``
(the history, docs/history.md). Each stage is also
a job entry point: ``python -m pipelines.bronze ...`` = ``binlake bronze ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence, TextIO

from pipelines.bronze import command as bronze_command
from pipelines.bronze.command import add_bronze_arguments, cmd_bronze
from pipelines.config import Config
from pipelines.cli.entry import add_global_options, csv_list, own_process, run
from pipelines.errors import ConfigError
from pipelines.silver import command as silver_command
from pipelines.silver.command import cmd_silver, report_silver
from pipelines.cli.text_table import FORMATS

__all__ = ["main", "command", "build_parser", "write_result", "SQL_TABLE_ROWS"]

SQL_TABLE_ROWS = 50  # a one-shot `binlake sql` table's rows unless --limit says otherwise


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="binlake", description="Every row change of MySQL/MariaDB binary logs, kept "
        "queryable in a Delta Lake (bronze, silver, gold). `binlake COMMAND --help` for one "
        "command; docs/ for the rest.")
    add_global_options(ap)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("decode", help="print a binlog file's decoded events")
    p.add_argument("file")
    p.add_argument("--format", choices=["text", "jsonl"], default="text")

    add_bronze_arguments(sub.add_parser("bronze", help=bronze_command.HELP))
    p = sub.add_parser("index", help="run every stage (bronze, silver, gold) over binlog files")
    add_bronze_arguments(p)
    p.add_argument("--gold-dsn", help="also export to gold: mysql://user:pw@host:port/db")
    from pipelines.mirror.command import add_mirror_flag
    add_mirror_flag(p)

    sub.add_parser("silver", help=silver_command.HELP)

    p = sub.add_parser("snapshot", help="take (or import) a schema snapshot of the source")
    p.add_argument("--source-dsn", help="mysql://user:password@host:port/ (default from conf)")
    p.add_argument("--schemas", type=csv_list, help="only these schemas")
    p.add_argument("--source", help="source name (default from conf)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--export", help="also write the snapshot to this JSON file")
    g.add_argument("--import", dest="import_path", help="store a snapshot from a JSON file")
    from pipelines.history.command import add_data_argument, add_history_parsers
    add_data_argument(p)

    p = sub.add_parser("quality", help="run the data-quality rules (conf/quality.toml)")
    p.add_argument("--window", default=None,
                   help="last-run (default: rows of the latest silver commit), all, or Nh/Nd")
    p.add_argument("--rules", help="rules file (default conf/quality.toml)")
    p.add_argument("--format", choices=["text", "json"], default="text")

    from pipelines.gold.commands import (GOLD_HELP, add_gold_arguments, add_init_arguments,
                                         add_rotate_arguments, add_vacuum_arguments)

    add_init_arguments(sub.add_parser("init", help="create the gold database and tables"))
    add_gold_arguments(sub.add_parser("gold", help=GOLD_HELP))
    add_rotate_arguments(sub.add_parser("rotate", help="drop expired gold hours, add future ones"))
    add_vacuum_arguments(sub.add_parser("vacuum", help="Delta retention properties + VACUUM"))

    from pipelines.stream.command import add_stream_parser

    add_stream_parser(sub)
    add_history_parsers(sub)
    from pipelines.assist.command import add_assist_parsers

    add_assist_parsers(sub)
    from pipelines.ops.repair import add_repair_parser

    add_repair_parser(sub)
    from pipelines.mirror.command import add_mirror_parser
    add_mirror_parser(sub)
    from pipelines.ops.serve import add_serve_parser
    add_serve_parser(sub)
    from pipelines.cli.optimize import add_optimize_parser
    add_optimize_parser(sub)

    p = sub.add_parser("status", help="what is indexed")
    p.add_argument("--format", choices=["text", "json"], default="text")

    p = sub.add_parser("sql", help="run SQL with the lake's tables registered as views "
                                   "(no query: an interactive shell)")
    p.add_argument("query", nargs="?")
    p.add_argument("--limit", type=int, default=None,
                   help=f"at most this many rows (table: {SQL_TABLE_ROWS}, csv and jsonl: all; "
                        "shell: 1000)")
    p.add_argument("--format", choices=list(FORMATS), default=None,
                   help="one-shot query's output (default table; the shell prints tables)")
    return ap


def _cmd_decode(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.binlog.parser import ChecksumPolicy
    from pipelines.binlog.reader import BinlogFileReader
    from pipelines.binlog.show import write_events

    reader = BinlogFileReader(args.file, checksum=ChecksumPolicy(cfg.bronze.checksum))
    write_events(reader, sys.stdout, args.format)
    if reader.partial_tail:
        print(f"# {reader.name}: unfinished tail after pos {reader.end_pos}", file=sys.stderr)
    return 0


def _cmd_index(args: argparse.Namespace, cfg: Config) -> int:
    """bronze, silver, then quality over the rows silver added and gold (when asked) at once,
    then the mirror when asked."""
    code = cmd_bronze(args, cfg, on_todo=_warm_silver(cfg))
    res = report_silver(cfg)
    from pipelines.quality import Window, run_quality, summary_line
    from pipelines.engine.session import get_spark

    # Every row this run's silver added (silver commits once per silver.commit_mb).
    window = Window(since=res.version_before if res.version_before is not None else -1)
    spark = get_spark(cfg.engine)
    if not cfg.gold.dsn:
        print(summary_line(run_quality(spark, cfg, window=window)))
    else:
        code = max(code, _quality_and_gold(spark, cfg, window))
    if args.mirror:
        from pipelines.mirror.command import cmd_mirror
        code = max(code, cmd_mirror(args, cfg))
    return code


def _quality_and_gold(spark, cfg: Config, window) -> int:
    """``index --gold-dsn``: quality over the run's silver rows on a thread while gold exports
    them (neither waits on the other: quality reports, it does not hold gold back; the gold
    server's inserts leave binlake's process mostly idle, docs/performance.md, Gold export).
    Quality's line is printed before gold's; gold's error wins over quality's."""
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.gold.commands import report_gold
    from pipelines.gold.job import run_gold
    from pipelines.quality import run_quality, summary_line

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-quality") as pool:
        quality = pool.submit(run_quality, spark, cfg, window=window)
        try:
            gold = run_gold(spark, cfg)
        except BaseException:
            if quality.exception() is None:
                print(summary_line(quality.result()))
            raise
        print(summary_line(quality.result()))
    return report_gold(gold)


def _warm_silver(cfg: Config):
    """``index``: when bronze is about to decode at least ``silver.compiled_min_mb`` of
    binlog (not counting the files already indexed), silver's compiled loops load on a
    thread of their own while it decodes, where this process renders them
    (docs/performance.md)."""
    from pipelines.bronze.files import megabytes
    from pipelines.silver.render_warm import warm_in_background

    def on_todo(todo: list[str]) -> None:
        if todo and megabytes(todo, cfg.storage) >= cfg.silver.compiled_min_mb:
            warm_in_background(cfg)

    return on_todo


def _cmd_quality(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.quality import exit_code, load_rules, render_result, run_quality
    from pipelines.engine.session import get_spark

    res = run_quality(get_spark(cfg.engine), cfg, window=args.window,
                      rules=load_rules(args.rules))
    print(render_result(res, args.format))
    return exit_code(res)


def _cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.ops.status import collect_status, render_status
    from pipelines.engine.session import get_spark

    st = collect_status(get_spark(cfg.engine), cfg)
    print(json.dumps(st, indent=2, default=str) if args.format == "json" else render_status(st))
    return 0


def _cmd_sql(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark
    from pipelines.ops.views import register_views

    if args.limit is not None and args.limit <= 0:
        raise ConfigError("--limit must be positive")
    if args.query is None and args.format not in (None, "table"):
        raise ConfigError(f"--format {args.format} is for a one-shot query (binlake sql "
                          "\"SELECT ...\"); the shell prints tables")
    spark = get_spark(cfg.engine)
    register_views(spark, cfg)
    if args.query is None:
        from pipelines.cli.shell import run_shell
        return run_shell(spark, limit=args.limit or 1000)
    write_result(spark.sql(args.query), args.format or "table", args.limit, sys.stdout)
    return 0


def write_result(df, fmt: str, limit: int | None, out: TextIO) -> int:
    """A one-shot query's result in ``fmt`` (``text_table``): at most ``limit`` rows (None: a
    table's :data:`SQL_TABLE_ROWS`, csv and jsonl every row, streamed). A table ends with
    its row count and how many rows it left out, csv and jsonl say that on stderr (their
    output stays data); a statement without a result prints ``OK`` as a table. Returns the
    rows written. Counting the rows left out runs the query once more, only when some were."""
    from pipelines.cli.text_table import CELL_WIDTH, rows_line, write_rows

    columns = df.columns
    if not columns:
        if fmt == "table":
            print("OK", file=out)
        return 0
    if limit is None and fmt == "table":
        limit = SQL_TABLE_ROWS
    if limit is None:
        return write_rows(columns, df.toLocalIterator(), fmt, out)
    rows = df.limit(limit + 1).collect()
    left_out = df.count() - limit if len(rows) > limit else 0
    n = write_rows(columns, rows[:limit], fmt, out, width=CELL_WIDTH)
    if fmt == "table":
        print(rows_line(n, left_out), file=out)
    elif left_out:
        print(f"sql: {n} row{'s' if n != 1 else ''} written, {left_out} left out: raise "
              "--limit", file=sys.stderr)
    return n


def _cmd_snapshot(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark
    from pipelines.silver.snapshot_job import print_summary, run_snapshot

    if getattr(args, "data", False):
        from pipelines.history.command import cmd_data_snapshot
        return cmd_data_snapshot(args, cfg)
    snap, checks = run_snapshot(get_spark(cfg.engine), cfg, source_dsn=args.source_dsn,
                                schemas=args.schemas, export_path=args.export,
                                import_path=args.import_path)
    print_summary(snap, checks, cfg=cfg, export_path=args.export)
    return 0


def _gold_command(name: str):
    def run(args: argparse.Namespace, cfg: Config) -> int:
        from pipelines.gold import commands

        return getattr(commands, f"cmd_{name}")(args, cfg)

    return run


def _cmd_stream(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.stream.command import cmd_stream

    return cmd_stream(args, cfg)


_COMMANDS = {"decode": _cmd_decode, "bronze": cmd_bronze, "index": _cmd_index,
             "silver": cmd_silver, "snapshot": _cmd_snapshot, "quality": _cmd_quality,
             "stream": _cmd_stream, "init": _gold_command("init"), "gold": _gold_command("gold"),
             "rotate": _gold_command("rotate"), "vacuum": _gold_command("vacuum"),
             "status": _cmd_status, "sql": _cmd_sql}


def command() -> int:
    """The ``binlake`` console command and ``python -m pipelines`` (``pipelines.cli.main``):
    :func:`main` in a process of its own. Such a process never runs IPython, which the Spark
    Connect client imports, where it is installed, to size a progress bar (~0.05 s), and
    then with ipykernel on the first DataFrame call to name notebook cells (~0.09 s): it is
    kept out (pyspark falls back to 80 columns and plain call sites). Not where Spark or
    Databricks started this Python: the platform's own code may use it there."""
    if own_process():
        sys.modules.setdefault("IPython", None)  # `import IPython` then raises ImportError
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``binlake``; returns the process exit code."""
    args = build_parser().parse_args(argv)
    return run(args, _COMMANDS.get(args.command, getattr(args, "handler", None)))


if __name__ == "__main__":
    sys.exit(command())
