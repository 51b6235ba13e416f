"""``binlake mirror`` on the command line: its parser and its handler (``pipelines.command``);
``--mirror``, the flag of ``index`` and ``stream``."""

from __future__ import annotations

import argparse

from pipelines.config import Config

__all__ = ["add_parser", "cmd_mirror", "add_mirror_flag", "print_result"]


def add_parser(sub) -> None:
    """Add ``mirror`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("mirror", help="typed current-state and history tables per source table")
    p.add_argument("--source", help="source whose silver rows to mirror (default from conf)")
    p.set_defaults(handler=cmd_mirror)


def add_mirror_flag(p: argparse.ArgumentParser) -> None:
    """``--mirror`` for ``index`` and ``stream``: run the mirror after silver."""
    p.add_argument("--mirror", action="store_true",
                   help="also update the typed mirror tables after silver")


def print_result(res, cfg: Config) -> None:
    from pipelines.mirror.job import mirror_path

    for t in res.tables:
        schema, table = t.name.split(".", 1)
        print(f"mirror: {t.name}: {t.changes} row changes"
              + (" (layout evolved)" if t.evolved else "")
              + f" -> {mirror_path(cfg, 'current', schema, table)}")
    for (schema, table), what in sorted(getattr(res, "gone", {}).items()):
        print(f"mirror: {schema}.{table}: {what}; its mirror keeps the rows it had then -> "
              f"{mirror_path(cfg, 'current', schema, table)}")
    rate = res.changes / res.seconds if res.seconds else 0.0
    span = (f"silver v{res.to_version} from the start"
            if res.from_version is None or res.from_version < 0
            else f"silver v{res.from_version} -> v{res.to_version}")
    print(f"mirror: {len(res.tables)} table(s), {res.changes} row changes in "
          f"{res.seconds:.1f}s ({rate:,.0f}/s), {span}" + (f" ({res.note})" if res.note else ""))


def cmd_mirror(args: argparse.Namespace, cfg: Config) -> int:
    from pipelines.mirror.job import run_mirror
    from pipelines.engine.session import get_spark

    print_result(run_mirror(get_spark(cfg.engine), cfg, source=getattr(args, "source", None)),
                 cfg)
    return 0
