"""Job entry point of the silver stage: ``python -m pipelines.silver [global opts]``.

Same options as ``binlake silver``; global options (``--lake``, ``--conf``, ``--spark-remote``,
``--engine``, ``-v``) may come anywhere.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli import stage_main


def main(argv: Sequence[str] | None = None) -> int:
    return stage_main("silver", argv)


if __name__ == "__main__":
    sys.exit(main())
