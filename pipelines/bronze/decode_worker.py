"""Entry of the decoding worker process: ``python -m pipelines.bronze.decode_worker FILE ...``.

Only sets the process up, then runs ``decode_task.main``: pyarrow imports pandas (0.2 s)
the first time it converts Python lists, and a short-lived worker per file does not need it.
"""

from __future__ import annotations

import sys


class _NoPandas:
    """Import hook making ``import pandas`` fail fast (pyarrow then skips its pandas checks)."""

    def find_spec(self, name: str, path=None, target=None):  # noqa: ANN001 - importlib API
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by the binlake decoding worker")
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, _NoPandas())
    from pipelines.bronze.decode_task import main

    sys.exit(main())
