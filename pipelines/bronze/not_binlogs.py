"""Retract the ``bronze/files`` entries an older binlake left for files that are not binlogs.

Before ``--all`` read the server's index file or the binlog magic (``binlog_dir.py``), it
took every ``<base>.NNNNNN`` file, so a MariaDB data directory's ``aria_log.00000001`` was
decoded, failed at position 0 and stayed ``failed`` in ``bronze/files`` (and in ``binlake
status``) with an ERROR row in bronze, however often bronze ran. A bronze run over the
directory now retracts such an entry: a ``failed`` file of this source, recorded at a path in
``--binlog-dir``, that is there and does not begin with the binlog magic gets a ``dropped``
row (``files.py``: the file is no longer the lake's) and its bronze partition is deleted.

The look is a read of ``bronze/files`` and a few bytes of the files it names; the writes,
only when there is something to retract, are made under the ``bronze`` lease like every
bronze write (a concurrent run: the next run retracts).
"""

from __future__ import annotations

import os

from pipelines.binlog.directory import begins_with_magic
from pipelines.bronze.files import DROPPED, FileState, load_states, save_states
from pipelines.config import Config
from pipelines.lake.delta_ops import sql_string
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.lake.lease import holds_lease

__all__ = ["stale_entries", "retract_not_binlogs"]


def stale_entries(spark, cfg: Config, binlog_dir: str) -> list[FileState]:
    """This source's ``failed`` entries for files in ``binlog_dir`` that are not binlogs."""
    if not os.path.isdir(binlog_dir):
        return []  # an object-store prefix, or a directory gone: nothing to look at here
    here = os.path.abspath(binlog_dir)
    out = []
    for (source, name), st in load_states(spark, Lake.of(cfg)).items():
        if source != cfg.source.name or st.status != "failed" or not st.path:
            continue
        if os.path.dirname(os.path.abspath(st.path)) != here:
            continue
        path = os.path.join(here, name)
        if os.path.isfile(path) and not begins_with_magic(path):
            out.append(st)
    return sorted(out, key=lambda s: s.binlog_file)


@holds_lease("bronze")
def retract_not_binlogs(spark, cfg: Config, *, binlog_dir: str) -> list[str]:
    """Retract :func:`stale_entries` (module docstring); the names of the files retracted."""
    stale = stale_entries(spark, cfg, binlog_dir)  # again, under the lease
    if not stale:
        return []
    lake = Lake.of(cfg)
    names = [st.binlog_file for st in stale]
    if lake.exists(spark, BRONZE_EVENTS):
        lake.delete_where(spark, BRONZE_EVENTS,
                          f"source_id = {sql_string(cfg.source.name)} AND binlog_file IN ("
                          + ", ".join(sql_string(n) for n in names) + ")")
    save_states(spark, lake, [FileState(st.source_id, st.binlog_file, st.path, st.size, DROPPED,
                                        error="not a binlog: no longer indexed")
                              for st in stale])
    return names
