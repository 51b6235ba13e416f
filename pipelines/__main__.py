"""``python -m pipelines`` = ``binlake``."""

import sys

from pipelines.cli.main import command

sys.exit(command())
