"""One writer per lake and stage: leases on the lake's own store.

A lease is a generation-numbered file under ``<lake>/_binlake/leases/<stage>/``
(``00000000000000000007.json``). The current lease is the highest generation. A writer takes
the stage by creating generation ``top + 1`` with **create-if-absent** (the same primitive
Delta's ``_delta_log`` relies on: the first writer of version N wins), and only when ``top``
is released, expired, or held by a dead process on this host. Two writers that both see a
free lease both try ``top + 1``; exactly one create succeeds, the other looks again. On an
``s3://`` lake the files are objects and create-if-absent is a conditional PUT
(``pipelines/lake/lease_s3.py``).

The holder's file says who (host, pid, the process start time, the command, since when) and
until when (``expires``); a heartbeat thread renews ``expires`` every third of
``lease.expiry_seconds`` and checks nobody took a higher generation (which only happens when
the holder stalled past its expiry: the lease is then *lost* and the block raises
:class:`LeaseLostError` on exit). Release marks the file ``released``. A holder killed with
``kill -9`` blocks others until ``expires`` at most, and not at all on the same host (its pid
is gone).

A second writer waits up to ``lease.wait_seconds`` (``--wait``), saying once who holds the
stage, then raises :class:`LeaseHeldError` (exit code 75, ``EX_TEMPFAIL``).

Gold's state lives in MySQL: ``binlake gold`` into one gold database is serialised by the
server's lock as well (``pipelines/gold/lock.py``).

See ``docs/concurrency.md`` for which commands take which lease, and why this is safe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from pipelines.config import LEASES_DIR, Config, lake_dir
from pipelines.errors import (EXIT_BUSY, BinlakeError, ConfigError, LakeFaultError,
                              LeaseHeldError, LeaseLostError)

__all__ = ["Holder", "LeaseStore", "LocalLeaseStore", "Lease", "lake_lease", "holds_lease",
           "lease_if_free", "current_holders", "redact_command", "EXIT_BUSY"]

log = logging.getLogger(__name__)

_GEN_WIDTH = 20


def redact_command(argv: list[str] | None = None) -> str:
    """The command line with DSN passwords replaced by ``***`` (lease files are readable)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and argv[0].endswith(("cli.py", "__main__.py")):
        argv[0] = "binlake"
    from pipelines.mysql.dsn import redact_urls

    return redact_urls(" ".join(argv))


def _proc_start(pid: int) -> str | None:
    """The process start time (clock ticks since boot) from /proc: tells a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return started is None or _proc_start(pid) in (None, started)


@dataclass(frozen=True)
class Holder:
    """What a lease file says."""

    stage: str
    generation: int
    token: str
    host: str
    pid: int
    pid_start: str | None
    command: str
    since: str  # ISO-8601 UTC
    expires: float  # epoch seconds
    released: bool = False

    def free(self, now: float | None = None) -> bool:
        """Released, expired, or held by a process of this host that is gone."""
        if self.released or (now or time.time()) >= self.expires:
            return True
        return self.host == socket.gethostname() and not _alive(self.pid, self.pid_start)

    def describe(self) -> str:
        return (f"host {self.host} pid {self.pid} ({self.command!r}) since {self.since}, "
                f"lease expires in {max(self.expires - time.time(), 0):.0f}s unless renewed")

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "Holder":
        return cls(**json.loads(data))


class LeaseStore(Protocol):
    """Where a stage's lease files live: a directory (:class:`LocalLeaseStore`) or an object
    store prefix (:class:`pipelines.lake.lease_s3.S3LeaseStore`). ``dir`` names it in messages."""

    dir: str

    def generations(self) -> list[int]: ...
    def read(self, gen: int) -> bytes | None: ...
    def create(self, gen: int, data: bytes) -> bool: ...
    def replace(self, gen: int, data: bytes) -> bool | None: ...
    def delete(self, gen: int) -> None: ...


class LocalLeaseStore:
    """Lease files in a directory of a local or mounted filesystem.

    Create-if-absent is ``link(2)`` of a fully written temporary file (fails with EEXIST when
    the name exists; POSIX, NFS included); renewals replace the file atomically. An object
    store maps the same three calls on a conditional PUT (``If-None-Match: *`` on S3, GCS
    ``ifGenerationMatch=0``, Azure ``If-None-Match: *``): ``pipelines/lake/lease_s3.py`` for S3.
    """

    def __init__(self, directory: str) -> None:
        self.dir = directory

    def _path(self, gen: int) -> str:
        return os.path.join(self.dir, f"{gen:0{_GEN_WIDTH}d}.json")

    def generations(self) -> list[int]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(int(n[:-5]) for n in names
                      if n.endswith(".json") and n[:-5].isdigit())

    def read(self, gen: int) -> bytes | None:
        try:
            with open(self._path(gen), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def _tmp(self, data: bytes) -> str:
        os.makedirs(self.dir, exist_ok=True)
        tmp = os.path.join(self.dir, f".tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    def create(self, gen: int, data: bytes) -> bool:
        """Write generation ``gen`` unless it exists; True when this call created it."""
        tmp = self._tmp(data)
        try:
            os.link(tmp, self._path(gen))
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def replace(self, gen: int, data: bytes) -> None:
        os.replace(self._tmp(data), self._path(gen))

    def delete(self, gen: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(gen))


def _url_root(cfg: Config) -> str | None:
    """The lake root's URL scheme (``s3``), or None for a local or mounted path."""
    from pipelines.config import is_url_root

    return cfg.lake.root.split("://", 1)[0] if is_url_root(cfg.lake.root) else None


def _store(cfg: Config, stage: str) -> LeaseStore:
    """The lease store of ``stage`` for the lake root's kind (path, or ``s3://`` object store)."""
    scheme = _url_root(cfg)
    if scheme in ("s3", "s3a"):
        from pipelines.lake.lease_s3 import s3_store

        return s3_store(cfg, stage)
    if scheme is not None:
        raise ConfigError(f"lake.root {cfg.lake.root}: leases need a local or mounted path or "
                          "an s3:// object store (docs/concurrency.md)")
    return LocalLeaseStore(lake_dir(cfg.lake_root, LEASES_DIR, stage))


def _stage_stores(cfg: Config) -> dict[str, LeaseStore]:
    """Every stage with lease files on the lake, with its store."""
    if _url_root(cfg) in ("s3", "s3a"):
        from pipelines.lake.lease_s3 import s3_stages

        return dict(s3_stages(cfg))
    base = lake_dir(cfg.lake_root, LEASES_DIR)
    try:
        return {s: LocalLeaseStore(os.path.join(base, s)) for s in sorted(os.listdir(base))}
    except FileNotFoundError:
        return {}


def _read(store: LeaseStore, gen: int) -> Holder | None:
    data = store.read(gen)
    if data is None:
        return None
    try:
        return Holder.from_json(data)
    except (ValueError, TypeError):
        # A lease file that is not ours to understand (torn by a full disk): treat it as
        # free, the next generation replaces it.
        return None


class Lease:
    """One stage's lease on one lake; use :func:`lake_lease` rather than this directly."""

    def __init__(self, store: LeaseStore, stage: str, command: str, *, expiry: float,
                 wait: float, poll: float = 0.25, say: Callable[[str], None] | None = None):
        self.store, self.stage, self.command = store, stage, command
        self.expiry, self.wait, self.poll = expiry, wait, poll
        self.say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.me: Holder | None = None
        self.lost: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _mine(self, gen: int) -> Holder:
        return Holder(self.stage, gen, uuid.uuid4().hex, socket.gethostname(), os.getpid(),
                      _proc_start(os.getpid()), self.command,
                      dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      time.time() + self.expiry)

    def acquire(self) -> Holder:
        """Take the lease, waiting up to ``wait`` seconds; raises :class:`LeaseHeldError`."""
        deadline = time.monotonic() + self.wait
        told = None
        while True:
            gens = self.store.generations()
            top = gens[-1] if gens else 0
            held = _read(self.store, top) if top else None
            if held is None or held.free():
                me = self._mine(top + 1)
                if self.store.create(top + 1, me.to_json()):
                    self.me = me
                    for g in gens[:-1]:  # keep the previous one for the record
                        self.store.delete(g)
                    self._start_heartbeat()
                    return me
                continue  # another writer took top + 1 first: look again
            if time.monotonic() >= deadline:
                raise LeaseHeldError(
                    f"{self.stage} lease at {self.store.dir} is held by {held.describe()}; "
                    f"gave up after waiting {self.wait:.0f}s (--wait / lease.wait_seconds)",
                    holder=held)
            if told != held.token:
                told = held.token
                self.say(f"binlake: {self.stage} is being written by {held.describe()}; "
                         f"waiting up to {self.wait:.0f}s")
            time.sleep(min(self.poll, max(deadline - time.monotonic(), 0.01)))

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name=f"lease-{self.stage}",
                                      daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.expiry / 3):
            try:
                self.renew()
            except (OSError, BinlakeError) as exc:  # keep trying: it expires on its own
                log.warning("%s lease: renewal failed: %s", self.stage, exc)

    def renew(self) -> None:
        """Push ``expires`` forward; notes the lease as lost when a higher generation exists."""
        me = self.me
        if me is None or self.lost:
            return
        gens = self.store.generations()
        if gens and gens[-1] != me.generation:
            other = _read(self.store, gens[-1])
            self.lost = (f"{self.stage} lease was taken over by "
                         f"{other.describe() if other else 'another writer'} while this run "
                         f"(pid {me.pid}) held it: it stalled longer than "
                         f"lease.expiry_seconds={self.expiry:.0f}")
            log.error("%s", self.lost)
            return
        renewed = dataclasses.replace(me, expires=time.time() + self.expiry)
        if self.store.replace(me.generation, renewed.to_json()) is False:
            self.lost = (f"{self.stage} lease at {self.store.dir} generation {me.generation} "
                         f"was rewritten by someone else while this run (pid {me.pid}) held it")
            log.error("%s", self.lost)
            return
        self.me = renewed

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        me, self.me = self.me, None
        if me is None or self.lost:
            return
        gens = self.store.generations()
        if gens and gens[-1] == me.generation:
            self.store.replace(me.generation, dataclasses.replace(me, released=True).to_json())


@contextlib.contextmanager
def lake_lease(cfg: Config, stage: str, command: str | None = None, *,
               say: Callable[[str], None] | None = None) -> Iterator[Holder]:
    """Hold ``stage``'s lease on the lake for the block (see the module docstring).

    Raises :class:`LeaseHeldError` when it stays busy beyond ``lease.wait_seconds`` and
    :class:`LeaseLostError` on exit when another writer took it over meanwhile. Re-entrant
    within a process (``index`` → silver inside the same stage is a no-op).
    """
    key = (cfg.lake_root, stage)
    if key in _HELD:
        yield _HELD[key]
        return
    lease = Lease(_store(cfg, stage), stage, command or redact_command(),
                  expiry=float(cfg.lease.expiry_seconds), wait=float(cfg.lease.wait_seconds),
                  say=say)
    try:
        holder = lease.acquire()
    except OSError as exc:
        full = "the lake's disk is full: " if _disk_full(exc) else ""
        raise LakeFaultError(f"{stage}: {full}cannot write its lease in {lease.store.dir}: "
                             f"{exc.strerror or exc}; nothing was written") from None
    _HELD[key] = holder
    try:
        yield holder
    finally:
        del _HELD[key]
        lease.release()
    if lease.lost:
        raise LeaseLostError(lease.lost + "; check the stage's output with `binlake status`")


_HELD: dict[tuple[str, str], Holder] = {}


@contextlib.contextmanager
def lease_if_free(cfg: Config, stage: str) -> Iterator[bool]:
    """Hold ``stage``'s lease for the block if it is free right now, never waiting: yields
    True, or False when another writer holds it (that writer does the work). A lease lost
    meanwhile is a warning: what the block committed stands on its own."""
    now = dataclasses.replace(cfg, lease=dataclasses.replace(cfg.lease, wait_seconds=0))
    try:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(lake_lease(now, stage))
            except LeaseHeldError:
                held = False
            else:
                held = True
            yield held
    except LeaseLostError as exc:
        log.warning("%s: %s", stage, exc)


_DISK_FULL = ("No space left on device", "Disk quota exceeded", "ENOSPC", "os error 28")


def _disk_full(exc: BaseException) -> str | None:
    """The disk-full line of an error (ours or the engine's wrapped one), else None."""
    if isinstance(exc, OSError) and exc.errno in (28, 122):
        return exc.strerror or "no space left"
    for line in str(exc).splitlines():
        if any(marker in line for marker in _DISK_FULL):
            return line.strip()[:300]
    return None


def holds_lease(stage: str | Callable[[Config], str]):
    """Decorator for a stage entry ``fn(spark, cfg, ...)`` or ``fn(cfg, ...)``: run it under
    :func:`lake_lease` (the stage name may depend on the config, e.g. the source)."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            cfg = kwargs.get("cfg") or next(a for a in args if isinstance(a, Config))
            name = stage(cfg) if callable(stage) else stage
            with lake_lease(cfg, name):
                from pipelines.lake.check import check_tables

                check_tables(cfg, name)  # a damaged table: refuse before writing anything
                try:
                    return fn(*args, **kwargs)
                except BinlakeError:
                    raise
                except Exception as exc:  # noqa: BLE001 - engines wrap OSError differently
                    full = _disk_full(exc)
                    if full is None:
                        raise
                    raise LakeFaultError(
                        f"{name}: the lake's disk is full ({cfg.lake_root}: {full}); nothing "
                        f"of this run was committed, its files stay in_progress: free space "
                        f"and run `binlake {name}` again (docs/repair.md)") from None

        return run

    return wrap


def current_holders(cfg: Config) -> list[dict]:
    """Every stage's lease as ``binlake status`` shows it (held ones and the last holder)."""
    out = []
    for stage, store in _stage_stores(cfg).items():
        gens = store.generations()
        h = _read(store, gens[-1]) if gens else None
        if h is None:
            continue
        state = ("released" if h.released else "expired" if time.time() >= h.expires
                 else "dead holder" if h.free() else "held")
        out.append({"stage": stage, "state": state, "host": h.host, "pid": h.pid,
                    "command": h.command, "since": h.since})
    return out
