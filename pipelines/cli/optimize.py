"""``binlake optimize`` on the command line: its arguments and its handler.

``pipelines.cli.main`` wires them with :func:`add_optimize_parser` (the handler travels as the
parser's ``handler`` default).
"""

from __future__ import annotations

import argparse

from pipelines.config import Config

__all__ = ["add_optimize_parser", "cmd_optimize"]


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_optimize_parser(sub) -> argparse.ArgumentParser:
    """Add the ``optimize`` sub-command to ``sub`` (the CLI's sub-parsers)."""
    from pipelines.ops.optimize import ROW_GROUP_ROWS, TARGET_MB

    p = sub.add_parser("optimize", help="compact small files; cluster silver by key (Z-order)")
    p.add_argument("--tables", type=_csv,
                   help="only these lake tables, comma-separated layer/name (default: all)")
    p.add_argument("--target-mb", type=int, default=TARGET_MB,
                   help=f"target data file size in MB (default {TARGET_MB})")
    p.add_argument("--row-group-rows", type=int, default=ROW_GROUP_ROWS,
                   help=f"rows per Parquet row group, the unit statistics skip "
                        f"(default {ROW_GROUP_ROWS}; delta-rs only)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(handler=cmd_optimize)
    return p


def cmd_optimize(args: argparse.Namespace, cfg: Config) -> int:
    import json
    from dataclasses import asdict

    from pipelines.ops.optimize import optimize_lake
    from pipelines.engine.session import get_spark

    done = optimize_lake(get_spark(cfg.engine), cfg, tables=args.tables,
                         target_mb=args.target_mb, row_group_rows=args.row_group_rows)
    if args.format == "json":
        print(json.dumps([asdict(t) for t in done], indent=2))
        return 0
    for t in done:
        if t.rows_before is not None:
            print(f"optimize: {t.table}: superseded state rows deleted, {t.rows_before} -> "
                  f"{t.rows_after} row(s)")
        if t.how == "unchanged":
            print(f"optimize: {t.table}: nothing to rewrite "
                  f"({t.files_before} file(s), version {t.version_before})")
            continue
        print(f"optimize: {t.table}: {t.how} via {t.via}, {t.partitions} partition(s), "
              f"{t.files_before} -> {t.files_after} file(s), version {t.version_before} -> "
              f"{t.version_after} in {t.seconds:.1f}s")
    if not done:
        print(f"optimize: no lake tables under {cfg.lake_root}")
    return 0
