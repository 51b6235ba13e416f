"""The stream's entries in file mode's progress table ``<lake>/bronze/files``.

How the two modes share a lake: the file the stream is writing is ``streaming``; a file the
stream finished (its ROTATE or STOP was streamed, the END row written) is ``completed`` with
``size`` = its length, so ``binlake bronze`` skips it as it skips files it indexed itself.
Silver picks up both (any status but ``in_progress``) whenever ``updated_at`` changes, which
the stream bumps for every file it appended to before silver runs. The table is a summary:
the truth is bronze (END and CHECKPOINT rows), and a stream restarted after a SIGKILL
re-derives its entries.

Every save appends rows, so every ``compact_every`` saves the stream calls ``compact``
(:func:`compact_if_free`: compaction under the ``bronze`` lease when it is free at that
moment, ``bronze/files.compact_states``), and every :data:`FEW_FILES` saves ``tidy``
(``few_files.keep_few_files``: the table's data files compacted once there are more than
that, under the ``bronze`` lease if it is free): silver reads the table whole at every follow.
"""

from __future__ import annotations

import logging
from typing import Callable

from pipelines.bronze.files import FileState, compact_states, load_states, save_states
from pipelines.config import Config
from pipelines.lake.few_files import FEW_FILES, keep_few_files
from pipelines.lake.tables import BRONZE_FILES, Lake
from pipelines.lake.lease import lease_if_free

__all__ = ["StreamFiles", "STREAMING", "compact_if_free"]

log = logging.getLogger(__name__)

STREAMING = "streaming"
COMPACT_EVERY = 200  # saves between two compaction checks of the table


class StreamFiles:
    def __init__(self, spark, lake: Lake, source_id: str, origin: str, *,
                 compact: Callable[[], None] | None = None,
                 compact_every: int = COMPACT_EVERY,
                 tidy: Callable[[], None] | None = None) -> None:
        self.spark = spark
        self.lake = lake
        self.source_id = source_id
        self.origin = origin  # e.g. stream://127.0.0.1:3306 (path column)
        self.mine: dict[str, FileState] = {}
        self.compact, self.compact_every, self.saves = compact, compact_every, 0
        self.tidy = tidy  # every FEW_FILES saves: the table's data files (pipelines/few_files)

    def states(self) -> dict[tuple[str, str], FileState]:
        return load_states(self.spark, self.lake)

    def _entry(self, name: str) -> FileState:
        st = self.mine.get(name)
        if st is None:
            st = self.mine[name] = FileState(self.source_id, name, f"{self.origin}/{name}", 0,
                                             STREAMING)
        return st

    def streaming(self, name: str, pos: int, row_changes: int) -> None:
        st = self._entry(name)
        st.status, st.size, st.last_pos, st.row_changes = STREAMING, pos, pos, row_changes
        st.error, st.updated_at = None, None

    def completed(self, name: str, end_pos: int, row_changes: int) -> None:
        st = self._entry(name)
        st.status, st.size, st.last_pos, st.row_changes = "completed", end_pos, end_pos, row_changes
        st.error, st.updated_at = None, None

    def save(self) -> None:
        """Append this stream's entries to the table (one commit; ``bronze/files.py``)."""
        changed = [st for st in self.mine.values() if st.updated_at is None]
        save_states(self.spark, self.lake, changed)
        self.saves += bool(changed)
        if changed and self.compact is not None and self.saves % self.compact_every == 0:
            self.compact()
        elif changed and self.tidy is not None and self.saves % FEW_FILES == 0:
            self.tidy()


def compact_if_free(spark, lake: Lake, cfg: Config) -> None:
    """Compact ``bronze/files`` when due, if the ``bronze`` lease is free right now (a bronze
    run holding it compacts on its own; the stream never waits for it). Never raises for a
    busy or lost lease: the DELETE is safe without it, the next check compacts."""
    with lease_if_free(cfg, "bronze") as held:
        if not held:
            return
        done = compact_states(spark, lake, strict=False)
        keep_few_files(spark, lake, BRONZE_FILES)
    if done is not None:
        log.info("bronze/files compacted: %d -> %d rows for %d file(s)", done.rows_before,
                 done.rows_after, done.files)
