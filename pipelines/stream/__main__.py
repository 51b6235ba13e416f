"""Job entry point of the live stream: ``python -m pipelines.stream [global opts] --server-id N ...``.

Same options as ``binlake stream``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli import stage_main


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main("stream", argv)


if __name__ == "__main__":
    sys.exit(main())
