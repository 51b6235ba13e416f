"""A writer of ``bronze/files`` without the ``bronze`` lease, as ``binlake stream`` is one.

``python -m tests.support.state_appender LAKE SOURCE FILES STOP SECONDS``: appends, a round
every SECONDS until the file STOP exists (then one round more), a new state for each of FILES
binlog names of SOURCE through :class:`pipelines.stream.files_state.StreamFiles` (the
stream's own code); prints each file's last saved state as one JSON line per file at the end.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(lake_root: str, source: str, files: int, stop: str, every: float) -> None:
    from pipelines.lake.tables import Lake
    from pipelines.engine.session import get_spark
    from pipelines.stream.files_state import StreamFiles

    spark = get_spark()
    states = StreamFiles(spark, Lake(lake_root), source, "stream://appender")
    names = [f"live-bin.{i + 1:06d}" for i in range(files)]
    n = 0
    while True:
        last = os.path.exists(stop)
        n += 1
        for i, name in enumerate(names):
            states.streaming(name, 1000 * n + i, n)
        states.save()
        if last:
            break
        time.sleep(every)
    for name in names:
        st = states.mine[name]
        print(json.dumps({"file": name, "status": st.status, "last_pos": st.last_pos,
                          "row_changes": st.row_changes, "rounds": n}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
