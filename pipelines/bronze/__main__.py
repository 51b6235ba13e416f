"""Job entry point of the bronze stage: ``python -m pipelines.bronze [global opts] --binlog-dir DIR (--all | --files ...)``.

Same options as ``binlake bronze``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.bronze.command import HELP, add_bronze_arguments, cmd_bronze
from pipelines.cli.entry import stage_main, stage_parser


def build_parser():
    return stage_parser("bronze", HELP, add_bronze_arguments)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), cmd_bronze, argv)


if __name__ == "__main__":
    sys.exit(main())
