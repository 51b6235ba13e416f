"""Job entry point of the gold stage: ``python -m pipelines.gold [global opts] [--gold-dsn URL]`` (better: env ``BINLAKE_GOLD_DSN``, a command line is visible to every user).

Same options as ``binlake gold``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.command import stage_main, stage_parser
from pipelines.gold import command


def build_parser():
    return stage_parser("gold", command.add_parser)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
