"""Job entry point of the gold stage: ``python -m pipelines.gold [global opts] [--gold-dsn URL]`` (better: env ``BINLAKE_GOLD_DSN``, a command line is visible to every user).

Same options as ``binlake gold``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli.entry import stage_main, stage_parser
from pipelines.gold.commands import GOLD_HELP, add_gold_arguments, cmd_gold


def build_parser():
    return stage_parser("gold", GOLD_HELP, add_gold_arguments)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), cmd_gold, argv)


if __name__ == "__main__":
    sys.exit(main())
