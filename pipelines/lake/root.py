"""Whether ``lake.root`` (``--lake``) names a lake: one clear line before a command creates
or reads anything there.

Why: on a mistyped ``--lake``, a command that only reads the lake reported an empty one and
exited 0 (``status``), or created directories there and reported success (``quality``:
``PASSED, 0 rule(s)``; ``silver``, ``repair`` … their leases); on a file it crashed with a
``NotADirectoryError`` traceback. So, for a lake on local disk:

- a root that exists and is not a directory is an error for every command that uses the lake;
- a root that does not exist is an error for a command that only reads the lake; the commands
  that write it (``bronze``, ``index``, ``snapshot``, ``stream``) create it.

Both are a :class:`ConfigError` naming the path (``binlake`` exits 2). An object-store root
(``s3://``) is not looked at, nor, for a reader, a catalog lake's root (the metastore holds its
tables, possibly managed ones elsewhere).
"""

from __future__ import annotations

import os

from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.config import is_url_root

__all__ = ["READS_LAKE", "USES_LAKE", "check_lake_root", "check_command_lake"]

# The commands that only read the lake (its root must be there), and every command that uses
# it (those that write it create a root that is not there; one that is a file is refused).
READS_LAKE = frozenset({"status", "quality", "silver", "mirror", "repair", "optimize",
                        "vacuum", "mcp", "console"})
USES_LAKE = READS_LAKE | {"bronze", "index", "snapshot", "stream", "sql", "serve"}


def _local_path(root: str) -> str | None:
    if is_url_root(root):
        return None
    return os.path.abspath(root[len("file://"):] if root.startswith("file://") else root)


def check_lake_root(cfg: Config, *, must_exist: bool) -> None:
    """Raise :class:`ConfigError` when the lake root is a file, or (``must_exist``: a command
    that only reads the lake) when a path lake's root does not exist. Creates nothing."""
    path = _local_path(cfg.lake.root)
    if path is None:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"lake {path}: not a directory (--lake, lake.root)")
    if must_exist and not cfg.lake.catalog and not os.path.exists(path):
        raise ConfigError(f"lake {path}: no such directory (--lake, lake.root); `binlake "
                          "index --binlog-dir DIR --all` creates a lake")


def check_command_lake(command: str, cfg: Config) -> None:
    """:func:`check_lake_root` as ``command`` needs it (nothing for one that does not use the
    lake: ``decode``, ``init``, ``rotate``, ``gold``'s own server …)."""
    if command in USES_LAKE:
        check_lake_root(cfg, must_exist=command in READS_LAKE)
