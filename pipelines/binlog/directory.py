"""Which files of a directory are binlogs: the server's index file, else the binlog magic.

A data directory holds more than binlogs, and some of its files have a binlog's name (a
base, a dot, six or more digits: ``names.is_binlog_file``): MariaDB's Aria log
``aria_log.00000001`` is one. The server lists its binlogs, one per line, in its index file
``<base>.index`` (``log_bin_index``; the lines are ``./mariadb-bin.000001`` or absolute
paths, the files ``SHOW BINARY LOGS`` reports, which is what ``binlake stream`` follows).
So, per base name:

- a base an index file in the directory lists (a ``*.index`` file every line of which names a
  binlog-named file): exactly the files it lists. A listed file is looked for in the directory
  by name first, then at the path the line gives (a directory copied elsewhere still works);
  one that is in neither place (purged, not copied) is left out;
- any other base: the binlog-named files that begin with the binlog magic ``\\xfebin``. An
  empty file (a binlog the server has only just created) is not taken yet; the next run
  takes it.

A replica's relay logs are binlog files too, but of its source's events, which its own
binlogs (``log_slave_updates``) hold again: a base that ``relay-log.info`` (or a multi-source
``relay-log-<name>.info``) names, or that ends in ``relay-bin`` (the server's default
``<host>-relay-bin``), is left out, with its index. Named with ``--files``, a relay log is
read like any binlog.

A file that is not a binlog is never selected, so it cannot fail a ``--all`` run; one named
on purpose (``--files``) that is not a binlog is a :class:`ConfigError` naming it
(:func:`check_binlog`).
"""

from __future__ import annotations

import logging
import os

from pipelines.binlog.names import binlog_order, is_binlog_file, split_binlog_name
from pipelines.binlog.framing import MAGIC
from pipelines.errors import ConfigError

__all__ = ["INDEX_SUFFIX", "list_binlogs", "read_index", "begins_with_magic", "check_binlog",
           "relay_bases"]

log = logging.getLogger(__name__)

INDEX_SUFFIX = ".index"


def read_index(path: str) -> list[str]:
    """The entries of a binlog index file, in its order (blank lines left out; a Windows
    server's ``.\\mysql-bin.000001`` read as ``./mysql-bin.000001``)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.strip().replace("\\", "/") for line in f if line.strip()]


def begins_with_magic(path: str) -> bool:
    """True when the file at ``path`` begins with ``\\xfebin`` (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def check_binlog(path: str, flag: str = "--files") -> None:
    """Raise :class:`ConfigError` naming ``path`` (and ``flag``) unless it is a binlog file."""
    if not os.path.isfile(path):
        raise ConfigError(f"{flag}: {path} does not exist")
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as exc:
        raise ConfigError(f"{flag}: {path} cannot be read: {exc.strerror}") from exc
    if head == MAGIC:
        return
    what = "it is empty" if not head else f"it begins with 0x{head.hex()}, a binlog with 0xfe62696e"
    raise ConfigError(f"{flag}: {path} is not a binlog ({what})")


def relay_bases(binlog_dir: str, names: list[str]) -> set[str]:
    """The relay log base names of a replica's data directory (module docstring)."""
    out = {split_binlog_name(n)[0] for n in names
           if is_binlog_file(n) and split_binlog_name(n)[0].endswith("relay-bin")}
    for name in names:
        if name != "relay-log.info" and not (name.startswith("relay-log-")
                                             and name.endswith(".info")):
            continue
        try:
            lines = read_index(os.path.join(binlog_dir, name))
        except OSError:
            continue
        # "5\n./host-relay-bin.000002\n2353\n…": the line count, then the relay log
        out.update(split_binlog_name(os.path.basename(e))[0] for e in lines[:2]
                   if is_binlog_file(os.path.basename(e)))
    return out


def _listed(binlog_dir: str, names: list[str]) -> dict[str, list[str]]:
    """Per base name an index file of the directory lists: the paths of its listed files."""
    out: dict[str, list[str]] = {}
    for name in sorted(n for n in names if n.endswith(INDEX_SUFFIX)):
        path = os.path.join(binlog_dir, name)
        try:
            entries = read_index(path) if os.path.isfile(path) else []
        except OSError as exc:
            log.warning("%s: cannot be read (%s): not used to select binlogs", path, exc.strerror)
            continue
        if not entries or not all(is_binlog_file(os.path.basename(e)) for e in entries):
            continue  # empty, or not a binlog index (another program's *.index)
        for entry in entries:
            base = split_binlog_name(os.path.basename(entry))[0]
            found = _resolve(binlog_dir, entry)
            if found is None:
                log.info("%s lists %s, which is not in %s: left out", name, entry, binlog_dir)
                continue
            out.setdefault(base, []).append(found)
    return out


def _resolve(binlog_dir: str, entry: str) -> str | None:
    """Where an index entry's file is: in ``binlog_dir`` by name, else at the entry's own path
    (relative to ``binlog_dir``); None when neither exists."""
    for path in (os.path.join(binlog_dir, os.path.basename(entry)),
                 os.path.join(binlog_dir, entry)):  # an absolute entry stays as it is
        if os.path.isfile(path):
            return os.path.normpath(path)
    return None


def list_binlogs(binlog_dir: str) -> list[str]:
    """The binlog files of ``binlog_dir`` (module docstring), in server order."""
    names = os.listdir(binlog_dir)
    relays = relay_bases(binlog_dir, names)
    listed = {b: p for b, p in _listed(binlog_dir, names).items() if b not in relays}
    chosen = {p for paths in listed.values() for p in paths}
    for name in names:
        if not is_binlog_file(name):
            continue
        path = os.path.normpath(os.path.join(binlog_dir, name))
        base = split_binlog_name(name)[0]
        if base in relays:
            log.info("%s: a replica's relay log: left out (--files names it to read it)", path)
        elif base in listed:
            if path not in chosen:
                log.info("%s: not listed in the server's index file: left out", path)
        elif begins_with_magic(path):
            chosen.add(path)
        else:
            log.info("%s: does not begin with the binlog magic: not a binlog, left out", path)
    return sorted(chosen, key=lambda p: (binlog_order(os.path.basename(p)), p))
