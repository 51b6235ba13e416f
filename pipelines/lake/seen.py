"""What this process has seen of the lake's tables on a filesystem, shared by every ``Lake``.

Each stage makes its own ``Lake`` object, and each asked the engine again whether a table
exists and whether it holds every declared column: a query plan each, which on the embedded
engine loads the table's Delta log (a checkpoint of every data file). One small-file run
asked that 24 times, 120–133 ms of a ~1.05 s run after a history, and 265 ms once 200 more
runs had left their files and commits (docs/performance.md, Optimize and the small tables).

Both answers only ever turn true: no stage drops a table, and no column is ever dropped. So
once seen, a table at a local path is remembered for the process together with the state of
its ``_delta_log`` directory (device, inode and change time), checked by one ``stat`` at each
use (the state is taken before the engine is asked). Any commit, checkpoint or log cleanup
changes the directory, and the next use asks the engine again: a table deleted, moved away
or replaced by another (ext4 gives a directory made again at once the same inode) is never
taken for the one seen. Object-store paths and catalog tables are not remembered here (their
``Lake`` object remembers them, as before). A local path whose :func:`state` is ``None`` has
no ``_delta_log`` directory, so no table: ``Lake.exists`` says so without a query (the
quality and silver runs asked about the schema snapshots' tables at every run).
"""

from __future__ import annotations

import os

__all__ = ["state", "seen", "saw", "forget_all"]

State = tuple[int, int, int]  # the _delta_log directory's st_dev, st_ino, st_ctime_ns

# path -> (the state it was seen in, holds every declared column)
_SEEN: dict[str, tuple[State, bool]] = {}


def state(path: str) -> State | None:
    """The state of the table's ``_delta_log`` directory at ``path`` now; ``None`` for an
    object store's URL or a path without one. Taken before asking the engine: a commit
    landing meanwhile makes the next :func:`seen` ask again."""
    if not os.path.isabs(path):  # an object store's URL
        return None
    try:
        st = os.stat(os.path.join(path, "_delta_log"))
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def seen(path: str, *, complete: bool = False) -> bool:
    """Whether this process saw a Delta table at ``path`` (``complete``: holding every
    declared column) and its ``_delta_log`` is as it was then."""
    got = _SEEN.get(path)
    if got is None:
        return False
    if state(path) != got[0]:
        _SEEN.pop(path, None)
        return False
    return got[1] or not complete


def saw(path: str, then: State | None, *, complete: bool = False) -> None:
    """Remember that the table at ``path`` exists (``complete``: and holds every declared
    column), as the engine said of its log in state ``then`` (:func:`state` before asking;
    ``None``: now). Nothing for an object store's URL or a path without a Delta log."""
    if then is None:
        then = state(path)
    if then is None:
        return
    got = _SEEN.get(path)
    _SEEN[path] = (then, complete or (got is not None and got[0] == then and got[1]))


def forget_all() -> None:
    """Forget every table (tests)."""
    _SEEN.clear()
