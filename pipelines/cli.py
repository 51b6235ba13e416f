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
import atexit
import gc
import json
import logging
import sys
from typing import Sequence

from pipelines.config import Config, load_config
from pipelines.errors import BinlakeError, ConfigError, LeaseHeldError

__all__ = ["main", "command", "build_parser", "stage_main"]


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _add_file_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--binlog-dir", required=True, help="directory holding the binlog files")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--all", action="store_true", help="every *.NNNNNN file, in numeric order")
    sel.add_argument("--files", type=_csv, help="comma-separated file names")
    p.add_argument("--schemas", type=_csv, help="only these schemas' row changes")
    p.add_argument("--tables", type=_csv, help="only these schema.table row changes")
    p.add_argument("--source", help="source name written as source_id (default from conf)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="binlake", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lake", help="lake root directory (default from conf: ./lake)")
    ap.add_argument("--catalog", help="catalog.schema: read and write metastore tables there "
                    "(default from conf: none, tables by path)")
    ap.add_argument("--conf", help="TOML config file (default conf/binlake.toml)")
    ap.add_argument("--spark-remote", help="Spark Connect URL sc://HOST:PORT")
    ap.add_argument("--engine", choices=["sail", "spark", "connect"],
                    help="engine when no session is active (default sail, embedded)")
    ap.add_argument("--defaults-file", help="MySQL option file whose [client] user/password "
                    "the source and gold connections use (docs/connections.md)")
    ap.add_argument("--wait", type=int, metavar="SECONDS",
                    help="wait this long for another writer of the stage (default 60), then exit 75")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("decode", help="print a binlog file's decoded events")
    p.add_argument("file")
    p.add_argument("--format", choices=["text", "jsonl"], default="text")

    p = sub.add_parser("bronze", help="decode binlog files into the bronze Delta table")
    _add_file_selection(p)
    p = sub.add_parser("index", help="run every stage (bronze, silver, gold) over binlog files")
    _add_file_selection(p)
    p.add_argument("--gold-dsn", help="also export to gold: mysql://user:pw@host:port/db")
    from pipelines.mirror.command import add_mirror_flag
    add_mirror_flag(p)

    sub.add_parser("silver", help="name new bronze row changes into the silver table")

    p = sub.add_parser("snapshot", help="take (or import) a schema snapshot of the source")
    p.add_argument("--source-dsn", help="mysql://user:password@host:port/ (default from conf)")
    p.add_argument("--schemas", type=_csv, help="only these schemas")
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

    from pipelines.gold.commands import (add_gold_arguments, add_init_arguments,
                                         add_rotate_arguments, add_vacuum_arguments)

    add_init_arguments(sub.add_parser("init", help="create the gold database and tables"))
    add_gold_arguments(sub.add_parser("gold", help="export new silver rows to gold, exactly once"))
    add_rotate_arguments(sub.add_parser("rotate", help="drop expired gold hours, add future ones"))
    add_vacuum_arguments(sub.add_parser("vacuum", help="Delta retention properties + VACUUM"))

    from pipelines.stream.command import add_stream_parser

    add_stream_parser(sub)
    add_history_parsers(sub)
    from pipelines.repair import add_repair_parser

    add_repair_parser(sub)
    from pipelines.mirror.command import add_mirror_parser
    add_mirror_parser(sub)
    from pipelines.serve import add_serve_parser
    add_serve_parser(sub)
    from pipelines.optimize_command import add_optimize_parser
    add_optimize_parser(sub)

    p = sub.add_parser("status", help="what is indexed")
    p.add_argument("--format", choices=["text", "json"], default="text")

    p = sub.add_parser("sql", help="run SQL with the lake's tables registered as views "
                                   "(no query: an interactive shell)")
    p.add_argument("query", nargs="?")
    p.add_argument("--limit", type=int, default=None, help="rows shown (50; shell: 1000)")
    return ap


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.conf, overrides={
        "lake.root": args.lake,
        "lake.catalog": args.catalog,
        "engine.remote": args.spark_remote,
        "engine.kind": args.engine,
        "source.name": getattr(args, "source", None),
        "gold.dsn": getattr(args, "gold_dsn", None),
        "source.defaults_file": args.defaults_file, "gold.defaults_file": args.defaults_file,
        "lease.wait_seconds": args.wait,
    })


def _where(cfg: Config, layer: str, name: str) -> str:
    from pipelines.lake import Lake, lake_table

    return Lake.of(cfg).where(lake_table(layer, name))


def _cmd_decode(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.bronze.parser import ChecksumPolicy
    from pipelines.bronze.reader import BinlogFileReader
    from pipelines.bronze.show import write_events

    reader = BinlogFileReader(args.file, checksum=ChecksumPolicy(cfg.bronze.checksum))
    write_events(reader, sys.stdout, args.format)
    if reader.partial_tail:
        print(f"# {reader.name}: unfinished tail after pos {reader.end_pos}", file=sys.stderr)
    return 0


def _cmd_bronze(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.bronze.job import run_bronze
    from pipelines.session import get_spark

    paths = _binlog_paths(args)
    _start_decoders(cfg, paths)
    spark = get_spark(cfg.engine)
    res = run_bronze(spark, cfg, binlog_dir=args.binlog_dir, all_files=args.all,
                     files=args.files, schemas=args.schemas, tables=args.tables,
                     on_todo=_warm_silver(cfg) if args.command == "index" else None)
    for f in res.files:
        line = (f"bronze: {f.binlog_file}: {f.status}, {f.events or 0} events, "
                f"{f.row_changes or 0} row changes, last pos {f.last_pos}")
        if f.error:
            line += f" ({f.error})"
        print(line)
    for name in res.skipped:
        print(f"bronze: {name}: already completed, skipped")
    if res.compacted:
        c = res.compacted
        print(f"bronze: bronze/files compacted: {c.rows_before} -> {c.rows_after} rows "
              f"for {c.files} file(s)")
    rate = res.row_changes / res.seconds if res.seconds else 0.0
    print(f"bronze: {len(res.files)} file(s), {res.row_changes} row changes in "
          f"{res.seconds:.1f}s ({rate:,.0f}/s) -> {_where(cfg, 'bronze', 'binlog_events')}")
    code = 1 if res.failed else 0
    if args.command == "index":
        code = max(code, _cmd_silver(args, cfg))
    return code


def _binlog_paths(args: argparse.Namespace) -> list[str]:
    """The files a bronze run will consider (empty when they cannot be listed: the run
    itself reports why)."""
    from pipelines.bronze.files import select_files

    try:
        return select_files(args.binlog_dir, all_files=args.all, names=args.files)
    except (BinlakeError, OSError):
        return []


def _start_decoders(cfg: Config, paths: list[str]) -> None:
    """Before the engine starts: the decoding workers' server boots on the other core while
    this process imports the Connect client and starts the engine (docs/performance.md)."""
    from pipelines.bronze.job import start_decoders

    if paths:
        start_decoders(cfg, paths, here=cfg.engine.kind == "sail" and not cfg.engine.remote)


def _warm_silver(cfg: Config):
    """``index``: when bronze is about to decode at least ``silver.compiled_min_mb`` of
    binlog (not counting the files already indexed), silver's compiled loops load on a
    thread of their own while it decodes, where this process renders them
    (docs/performance.md)."""
    from pipelines.bronze.files import megabytes
    from pipelines.silver.render_warm import warm_in_background

    def on_todo(todo: list[str]) -> None:
        if todo and megabytes(todo) >= cfg.silver.compiled_min_mb:
            warm_in_background(cfg)

    return on_todo


def _cmd_silver(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.session import get_spark
    from pipelines.silver.job import run_silver

    spark = get_spark(cfg.engine)
    res = run_silver(spark, cfg)
    print(f"silver: {len(res.files)} bronze file(s) considered, {res.appended} row changes "
          f"appended, {res.quarantined} in quarantine, version {res.silver_version} in "
          f"{res.seconds:.1f}s -> {_where(cfg, 'silver', 'binlog_events')}")
    code = 0
    if args.command == "index":
        from pipelines.quality import Window, run_quality, summary_line

        # Every row this run's silver added (silver commits once per silver.commit_mb).
        window = Window(since=res.version_before if res.version_before is not None else -1)
        print(summary_line(run_quality(spark, cfg, window=window)))
        if cfg.gold.dsn:
            from pipelines.gold.commands import cmd_gold

            args.gold_dsn = None  # taken from cfg.gold.dsn
            code = cmd_gold(args, cfg)
        if args.mirror:
            from pipelines.mirror.command import cmd_mirror
            code = max(code, cmd_mirror(args, cfg))
    return code


def _cmd_quality(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.quality import exit_code, load_rules, render_result, run_quality
    from pipelines.session import get_spark

    res = run_quality(get_spark(cfg.engine), cfg, window=args.window,
                      rules=load_rules(args.rules))
    print(render_result(res, args.format))
    return exit_code(res)


def _cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.status import collect_status, render_status
    from pipelines.session import get_spark

    st = collect_status(get_spark(cfg.engine), cfg)
    print(json.dumps(st, indent=2, default=str) if args.format == "json" else render_status(st))
    return 0


def _cmd_sql(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.session import get_spark
    from pipelines.views import register_views

    spark = get_spark(cfg.engine)
    register_views(spark, cfg)
    if args.query is None:
        from pipelines.shell import run_shell
        return run_shell(spark, limit=args.limit or 1000)
    df = spark.sql(args.query)
    print(_show_string(df, args.limit or 50))
    return 0


def _show_string(df, limit: int) -> str:
    rows = df.limit(limit).collect()
    cols = df.columns
    from pipelines.text_table import ascii_table

    return ascii_table(cols, [["NULL" if r[c] is None else str(r[c])[:60] for c in cols]
                              for r in rows])


def _cmd_snapshot(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.session import get_spark
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


_COMMANDS = {"decode": _cmd_decode, "bronze": _cmd_bronze, "index": _cmd_bronze,
             "silver": _cmd_silver, "snapshot": _cmd_snapshot, "quality": _cmd_quality,
             "stream": _cmd_stream, "init": _gold_command("init"), "gold": _gold_command("gold"),
             "rotate": _gold_command("rotate"), "vacuum": _gold_command("vacuum"),
             "status": _cmd_status, "sql": _cmd_sql}


_GLOBAL_WITH_VALUE = ("--lake", "--catalog", "--conf", "--spark-remote", "--engine", "--wait",
                      "--defaults-file")


def stage_main(command: str, argv: Sequence[str] | None = None) -> int:
    """Job entry point of one stage (``python -m pipelines.<stage>``, wheel tasks, spark-submit):
    ``binlake [global options] <command> [options]``, global options accepted anywhere."""
    _own_process()
    args = list(sys.argv[1:] if argv is None else argv)
    globals_, rest, i = [], [], 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if name in _GLOBAL_WITH_VALUE:
            width = 1 if "=" in arg else 2
            globals_ += args[i:i + width]
            i += width
        elif arg in ("-v", "--verbose"):
            globals_.append(arg)
            i += 1
        else:
            rest.append(arg)
            i += 1
    return main(globals_ + [command] + rest)


def command() -> int:
    """The ``binlake`` console command and ``python -m pipelines`` (``pipelines.cli``):
    :func:`main` in a process of its own. Such a process never runs IPython, which the Spark
    Connect client imports, where it is installed, to size a progress bar (~0.05 s), and
    then with ipykernel on the first DataFrame call to name notebook cells (~0.09 s): it is
    kept out (pyspark falls back to 80 columns and plain call sites). Not where Spark or
    Databricks started this Python: the platform's own code may use it there."""
    if _own_process():
        sys.modules.setdefault("IPython", None)  # `import IPython` then raises ImportError
    return main()


def _own_process() -> bool:
    """Whether this Python is binlake's own (not one Spark or Databricks started, whose
    platform code goes on after ours); there, the interpreter's teardown is skipped at exit.

    Teardown: after the last line, Python clears every module and collects their objects'
    cycles: with pyspark, pandas, pyarrow and the engine loaded, ~0.4 s of every command (a
    small file's ``binlake index`` is ~2 s). ``gc.freeze()`` is registered before the command
    runs, so it runs after every exit handler the command registers (they run last to first:
    the engine's stop, the workers' cleanup), and leaves the objects alive then to the
    operating system. Exit handlers, file closing and the flushing of output still run; only
    the collection of cycles at exit is skipped (which Python does not promise for objects
    alive at exit either)."""
    from pipelines.session import launched_by_spark

    if launched_by_spark():
        return False
    atexit.register(gc.freeze)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``binlake``; returns the process exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = _config(args)
        from pipelines.s3_client import export_engine_env

        export_engine_env(cfg.storage, cfg.lake.root)  # an s3:// lake: the engine's AWS_* env
        return _COMMANDS.get(args.command, getattr(args, "handler", None))(args, cfg)
    except ConfigError as exc:
        print(f"binlake: configuration error: {exc}", file=sys.stderr)
        return 2
    except LeaseHeldError as exc:
        print(f"binlake: busy: {exc}", file=sys.stderr)
        return 75  # EX_TEMPFAIL (docs/concurrency.md)
    except BinlakeError as exc:
        print(f"binlake: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as exc:  # the core wheel leaves the engine to the platform
        if (exc.name or "").split(".")[0] not in ("pyspark", "pysail", "delta"):
            raise
        print(f"binlake: error: {args.command} needs {exc.name}: run it where Spark is provided "
              f"(a cluster, spark-submit) or pip install 'binlake[local]'", file=sys.stderr)
        return 1
    except Exception as exc:  # engine errors (bad SQL) as one line, anything else raised
        from pipelines.history.command import engine_message
        message = engine_message(exc)
        if message is None or args.verbose:  # -v: the whole traceback
            raise
        print(f"binlake: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(command())
