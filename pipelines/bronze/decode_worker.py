"""Entry of the decoding worker process: ``python -m pipelines.bronze.decode_worker FILE ...``.

Only sets the process up, then runs ``decode_task.main``: pyarrow imports pandas (0.2 s)
the first time it converts Python lists, and a short-lived worker per file does not need it;
the cyclic garbage collector runs rarely (the decoder makes no cycles).
"""

from __future__ import annotations

import gc
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

    # Row images are lists of bytes (no reference cycles) freed by reference counting; the
    # cyclic collector only re-scans them. Collect rarely in this short-lived process.
    gc.freeze()
    gc.set_threshold(200_000, 50, 100)
    sys.exit(main())
