"""``python -m pipelines`` = ``binlake``."""

import sys

from pipelines.cli import main

sys.exit(main())
