"""``binlake silver`` and ``binlake snapshot`` on the command line: their parsers and handlers
(``pipelines.command``; ``silver`` has no options of its own).

``binlake index`` runs silver after bronze (``pipelines/index/stages.py``, which prints
:func:`print_silver`'s line); ``python -m pipelines.silver`` runs the same command on its own.
"""

from __future__ import annotations

import argparse

from pipelines.command import csv_list
from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.mysql.dsn import resolve_dsn

__all__ = ["HELP", "add_parser", "cmd_silver", "print_silver", "cmd_snapshot",
           "cmd_data_snapshot"]

HELP = "name new bronze row changes into the silver table"


def add_parser(sub) -> None:
    """Add ``silver`` and ``snapshot`` to ``binlake``'s sub-parsers."""
    sub.add_parser("silver", help=HELP).set_defaults(handler=cmd_silver)

    p = sub.add_parser("snapshot", help="take (or import) a schema snapshot of the source")
    p.add_argument("--source-dsn", help="mysql://user:password@host:port/ (default from conf)")
    p.add_argument("--schemas", type=csv_list, help="only these schemas")
    p.add_argument("--source", help="source name (default from conf)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--export", help="also write the snapshot to this JSON file")
    g.add_argument("--import", dest="import_path", help="store a snapshot from a JSON file")
    p.add_argument("--data", action="store_true",
                   help="also copy the tables' rows at one binlog position (a baseline for "
                        "reconstruct), e.g. binlake snapshot --data --schemas shop")
    p.set_defaults(handler=cmd_snapshot)


def print_silver(res, cfg: Config) -> None:
    """Print a silver run's line (``job.SilverResult``)."""
    from pipelines.lake.tables import SILVER_EVENTS, Lake

    print(f"silver: {len(res.files)} bronze file(s) considered, {res.appended} row changes "
          f"appended, {res.quarantined} in quarantine, version {res.silver_version} in "
          f"{res.seconds:.1f}s -> {Lake.of(cfg).where(SILVER_EVENTS)}")


def cmd_silver(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark
    from pipelines.silver.job import run_silver

    print_silver(run_silver(get_spark(cfg.engine), cfg), cfg)
    return 0


def cmd_snapshot(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.engine.session import get_spark
    from pipelines.silver.snapshot_job import print_summary, run_snapshot

    if getattr(args, "data", False):
        return cmd_data_snapshot(args, cfg)
    snap, checks = run_snapshot(get_spark(cfg.engine), cfg, source_dsn=args.source_dsn,
                                schemas=args.schemas, export_path=args.export,
                                import_path=args.import_path)
    print_summary(snap, checks, cfg=cfg, export_path=args.export)
    return 0


def cmd_data_snapshot(args: argparse.Namespace, cfg: Config) -> int:
    """``snapshot --data``: the tables' rows at one binlog position (a baseline for
    ``reconstruct``, docs/history.md)."""
    from pipelines.lake.tables import BASELINE_ROWS, Lake
    from pipelines.engine.session import get_spark
    from pipelines.silver.data_snapshot import take_data_snapshot

    if args.import_path or args.export:
        raise ConfigError("--data copies rows from a server: not with --import/--export")
    url = args.source_dsn or cfg.source.dsn
    if not url:
        raise ConfigError("snapshot --data needs --source-dsn mysql://user:password@host:"
                          "port/ or source.dsn in the configuration")
    dsn = resolve_dsn(url, cfg.source, section="source",
                      setting="--source-dsn" if args.source_dsn else "source.dsn")
    res = take_data_snapshot(get_spark(cfg.engine), cfg, dsn, schemas=args.schemas,
                             batch_rows=cfg.bronze.batch_rows)
    s = res.snapshot
    print(f"snapshot --data: {s.snapshot_id} at {s.binlog_file}:{s.binlog_pos} "
          f"(gtid {s.gtid_executed}): {sum(res.rows.values())} row(s) of {len(res.rows)} "
          f"table(s) -> {Lake.of(cfg).where(BASELINE_ROWS)}")
    return 0
