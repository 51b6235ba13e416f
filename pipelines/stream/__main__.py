"""Job entry point of the live stream: ``python -m pipelines.stream [global opts] --server-id N ...``.

Same options as ``binlake stream``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli.entry import stage_main, stage_parser
from pipelines.stream.command import HELP, add_stream_options, cmd_stream


def build_parser():
    return stage_parser("stream", HELP, add_stream_options)


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main(build_parser(), cmd_stream, argv)


if __name__ == "__main__":
    sys.exit(main())
