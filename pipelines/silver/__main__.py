"""Job entry point of the silver stage: ``python -m pipelines.silver [global opts]``.

Same options as ``binlake silver``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli.entry import stage_main, stage_parser
from pipelines.silver.command import HELP, add_silver_arguments, cmd_silver


def build_parser():
    return stage_parser("silver", HELP, add_silver_arguments)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), cmd_silver, argv)


if __name__ == "__main__":
    sys.exit(main())
