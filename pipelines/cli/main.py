"""The ``binlake`` command line.

``binlake [--lake DIR] [--conf FILE] [--spark-remote sc://HOST:PORT] [--engine KIND] COMMAND``

Commands: ``decode`` (print a binlog's events), ``bronze`` (decode files into the bronze Delta
table), ``snapshot`` (schema snapshot of the source), ``silver`` (name row changes), ``index``
(every stage, in order), ``init``/``gold``/``rotate``/``vacuum`` (the MySQL gold table),
``stream`` (follow a live server), ``status``, ``sql``, ``query``/``reconstruct``/``flashback``
(the history, docs/history.md). Each stage is also
a job entry point: ``python -m pipelines.bronze ...`` = ``binlake bronze ...``.

Each command module adds its commands with ``add_parser`` (``pipelines.command``), in the
order ``binlake --help`` lists them; a command runs its parser's ``handler``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from pipelines.assist import command as assist
from pipelines.binlog import command as decode
from pipelines.bronze import command as bronze
from pipelines.cli import sql
from pipelines.command import add_global_options, own_process, run
from pipelines.gold import command as gold
from pipelines.history import command as history
from pipelines.index import command as index
from pipelines.mirror import command as mirror
from pipelines.ops import optimize, quality, repair, serve, status
from pipelines.silver import command as silver
from pipelines.stream import command as stream

__all__ = ["main", "command", "build_parser", "COMMANDS"]

# Each adds its sub-command(s), in this order (silver: silver, snapshot; gold: init, gold,
# rotate, vacuum; history: query, reconstruct, flashback; assist: mcp, console).
COMMANDS = (decode, bronze, index, silver, quality, gold, stream, history, assist, repair,
            mirror, serve, optimize, status, sql)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="binlake", description="Every row change of MySQL/MariaDB binary logs, kept "
        "queryable in a Delta Lake (bronze, silver, gold). `binlake COMMAND --help` for one "
        "command; docs/ for the rest.")
    add_global_options(ap)
    sub = ap.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return ap


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
    return run(args, args.handler)


if __name__ == "__main__":
    sys.exit(command())
