"""Job entry point of the silver stage: ``python -m pipelines.silver [--lake DIR] [--conf F]``."""

from __future__ import annotations

import sys
from typing import Sequence

from pipelines.cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(list(sys.argv[1:] if argv is None else argv) + ["silver"])


if __name__ == "__main__":
    sys.exit(main())
