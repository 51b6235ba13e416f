"""``python -m pipelines`` = ``binlake``."""

import sys

from pipelines.cli import command

sys.exit(command())
