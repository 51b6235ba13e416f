"""Job entry point of the silver stage: ``python -m pipelines.silver [global opts]``.

Same options as ``binlake silver``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.command import stage_main, stage_parser
from pipelines.silver import command


def build_parser():
    return stage_parser("silver", command.add_parser)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
