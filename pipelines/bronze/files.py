"""Which binlog files to index, and the per-file progress table ``<lake>/bronze/files``.

Statuses: ``in_progress`` (a run started it and has not recorded an outcome: the next run
redoes it), ``completed`` (decoded to a closing ROTATE/STOP), ``partial`` (decoded to the last
complete event of a file that may still be written: the next run redoes it to pick up the
rest), ``failed`` (decoding stopped with ``error``; the rows before it are in bronze and the
next run redoes the file).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import asdict, dataclass

from pipelines.errors import ConfigError
from pipelines.lake import BRONZE_FILES, Lake

__all__ = ["FileState", "FILES_DDL", "select_files", "load_states", "save_states"]

_NUMBERED = re.compile(r"\.(\d{6})$")  # MySQL/MariaDB binlogs: base.NNNNNN
FILES_DDL = BRONZE_FILES.ddl()


@dataclass
class FileState:
    source_id: str
    binlog_file: str
    path: str
    size: int
    status: str
    events: int | None = None
    row_changes: int | None = None
    last_pos: int | None = None
    error: str | None = None
    updated_at: dt.datetime | None = None


def select_files(binlog_dir: str, *, all_files: bool = False,
                 names: list[str] | None = None) -> list[str]:
    """Paths to index: ``--all`` takes ``*.NNNNNN`` in numeric order; ``--files`` as given."""
    if not os.path.isdir(binlog_dir):
        raise ConfigError(f"--binlog-dir {binlog_dir}: not a directory")
    if all_files == bool(names):
        raise ConfigError("give exactly one of --all or --files")
    if all_files:
        found = [n for n in os.listdir(binlog_dir) if _NUMBERED.search(n)]
        found.sort(key=lambda n: (n[: _NUMBERED.search(n).start()], int(_NUMBERED.search(n).group(1))))
        return [os.path.join(binlog_dir, n) for n in found]
    out = []
    for n in names or []:
        path = n if os.path.isabs(n) else os.path.join(binlog_dir, n)
        if not os.path.isfile(path):
            raise ConfigError(f"--files: {path} does not exist")
        out.append(path)
    return out


def load_states(spark, lake: Lake) -> dict[tuple[str, str], FileState]:
    """Every file's last recorded state, keyed by (source_id, binlog_file)."""
    if not lake.exists(spark, BRONZE_FILES):
        return {}
    rows = lake.read(spark, BRONZE_FILES).collect()
    return {(r["source_id"], r["binlog_file"]): FileState(**r.asDict()) for r in rows}


def save_states(spark, lake: Lake, states: dict[tuple[str, str], FileState]) -> None:
    """Write the whole (small) table in one atomic overwrite commit."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows = []
    for st in sorted(states.values(), key=lambda s: (s.source_id, s.binlog_file)):
        if st.updated_at is None:
            st.updated_at = now
        rows.append(tuple(asdict(st).values()))
    lake.overwrite(spark.createDataFrame(rows, FILES_DDL), BRONZE_FILES)
