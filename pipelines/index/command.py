"""``binlake index`` on the command line: its parser and its handler (``pipelines.command``):
bronze over binlog files, then silver, then quality over the rows silver added and gold (when
asked) at once, then the mirror when asked (``stages.py``)."""

from __future__ import annotations

import argparse

from pipelines.bronze.command import add_bronze_arguments
from pipelines.config import Config
from pipelines.index.stages import Outcomes
from pipelines.mirror.command import add_mirror_flag

__all__ = ["add_parser", "cmd_index"]


def add_parser(sub) -> None:
    """Add ``index`` to ``binlake``'s sub-parsers."""
    p = sub.add_parser("index", help="run every stage (bronze, silver, gold) over binlog files")
    add_bronze_arguments(p)
    p.add_argument("--gold-dsn", help="also export to gold: mysql://user:pw@host:port/db")
    add_mirror_flag(p)
    p.set_defaults(handler=cmd_index)


def cmd_index(args: argparse.Namespace, cfg: Config) -> int:
    """Bronze, then the stages after it; the exit code: bronze's, or a later stage's when
    higher."""
    from pipelines.bronze.command import cmd_bronze
    from pipelines.engine.session import get_spark
    from pipelines.index.stages import run_stages

    told = _Printed(cfg, cmd_bronze(args, cfg, on_todo=_warm_silver(cfg)))
    stages = ["silver"] + ["gold"] * bool(cfg.gold.dsn) + ["mirror"] * bool(args.mirror)
    run_stages(get_spark(cfg.engine), cfg, stages, told, quality=True,
               source=getattr(args, "source", None))
    return told.code


class _Printed(Outcomes):
    """Each stage's lines on stdout, as its own command prints them; an error stops the run."""

    def __init__(self, cfg: Config, code: int) -> None:
        self.cfg = cfg
        self.code = code

    def silver(self, res) -> None:
        from pipelines.silver.command import print_silver

        print_silver(res, self.cfg)

    def quality(self, res) -> None:
        from pipelines.quality import summary_line

        print(summary_line(res))

    def gold(self, res) -> None:
        from pipelines.gold.command import report_gold

        self.code = max(self.code, report_gold(res))

    def mirror(self, res) -> None:
        from pipelines.mirror.command import print_result

        print_result(res, self.cfg)


def _warm_silver(cfg: Config):
    """When bronze is about to decode at least ``silver.compiled_min_mb`` of binlog (not
    counting the files already indexed), silver's compiled loops load on a thread of their
    own while it decodes, where this process renders them (docs/performance.md). Silver's
    rendering workers are forked from the server bronze's decoding workers start: it loads
    them too (``render_warm.preload_renderers``)."""
    from pipelines.bronze.files import megabytes
    from pipelines.silver.render_warm import preload_renderers, warm_in_background

    preload_renderers()

    def on_todo(todo: list[str]) -> None:
        if todo and megabytes(todo, cfg.storage) >= cfg.silver.compiled_min_mb:
            warm_in_background(cfg)

    return on_todo
