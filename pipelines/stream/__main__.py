"""Job entry point of the live stream: ``python -m pipelines.stream [global opts] --server-id N ...``.

Same options as ``binlake stream``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.command import stage_main, stage_parser
from pipelines.stream import command


def build_parser():
    return stage_parser("stream", command.add_parser)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
