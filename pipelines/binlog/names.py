"""Binlog file names: ``<base>.<number>`` (``mysql-bin.000042``), the one place that reads them.

Servers number their binlogs with at least six digits and go on past 999999; positions and
server order compare by the number, never by the text.
"""

from __future__ import annotations

import re

__all__ = ["split_binlog_name", "binlog_order", "file_number", "position_key", "seq_of",
           "SEQ_SHIFT", "is_binlog_file"]

_NUMBERED = re.compile(r"^(.*)\.(\d+)$")
# Silver's ``seq`` scale: a file's number above a position within it (positions < 2^32).
SEQ_SHIFT = 32


def split_binlog_name(name: str) -> tuple[str, int] | None:
    """``mysql-bin.000042`` → (``mysql-bin``, 42); ``None`` when there is no numeric suffix."""
    m = _NUMBERED.match(name or "")
    return (m.group(1), int(m.group(2))) if m else None


def binlog_order(name: str) -> tuple[str, int]:
    """A sort key putting a server's binlogs in server order; unnumbered names get -1."""
    return split_binlog_name(name) or (name or "", -1)


def file_number(name: str) -> int:
    """The numeric suffix of ``mysql-bin.000042`` (42); 0 when the name has none."""
    parts = split_binlog_name(name)
    return parts[1] if parts else 0


def position_key(binlog_file: str, pos: int) -> int:
    """A position comparable across a source's files: ``file_number << 32 | pos`` (silver's
    ``seq`` scale, ``Snapshot.seq``); ``pos`` may be a numpy array of positions."""
    return seq_of(file_number(binlog_file), pos)


def seq_of(number, pos):
    """``number << SEQ_SHIFT | pos``: file number ``number``'s position ``pos`` on the ``seq``
    scale (ints, or numpy arrays of them)."""
    return number << SEQ_SHIFT | pos


def is_binlog_file(name: str) -> bool:
    """True for a name a server gives its binlogs: a base, a dot and six or more digits."""
    m = _NUMBERED.match(name or "")
    return bool(m and m.group(1) and len(m.group(2)) >= 6)
