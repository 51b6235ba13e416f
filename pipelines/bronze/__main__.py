"""Job entry point of the bronze stage: ``python -m pipelines.bronze [global opts] --binlog-dir ...``.

Same options as ``binlake bronze``; global options (``--lake``, ``--conf``,
``--spark-remote``) may come first.
"""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    globals_, rest = [], []
    i = 0
    while i < len(args):
        if args[i] in ("--lake", "--conf", "--spark-remote", "--engine"):
            globals_ += args[i:i + 2]
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return cli_main(globals_ + ["bronze"] + rest)


if __name__ == "__main__":
    sys.exit(main())
