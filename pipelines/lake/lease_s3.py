"""The lake lease on an object store: the lease files of ``pipelines/lake/lease.py`` as S3 objects.

For a lake root ``s3://bucket/prefix`` the leases of a stage are the objects
``prefix/_binlake/leases/<stage>/<generation>.json``; the protocol is the one of the local
store (docs/concurrency.md), each call mapped onto an S3 request (``pipelines/lake/s3_client.py``):

* create-if-absent: ``PutObject`` with ``If-None-Match: *``; ``412 Precondition Failed``
  (or ``409`` for two conditional writes in flight) means another writer created it first;
* replace (renew, release): ``PutObject`` with ``If-Match: <the ETag we wrote>``; a ``412``
  means the object is no longer ours and the lease is lost;
* generations: ``ListObjectsV2`` of the stage's prefix (strongly consistent on S3 and MinIO);
* read: ``GetObject``; delete: ``DeleteObject``.

A store that ignores the conditional headers would let two writers in at once, so before the
first lease of a process on a bucket :func:`probe_conditional_put` checks that it honours
them (a second create-if-absent of one key must fail, a replace with a wrong ETag must fail)
and refuses the lake with a :class:`ConfigError` otherwise.

When a conditional PUT's answer is lost (a connection reset after the store wrote it) the
retry gets ``412``; the store then reads the object back and counts the call as won when the
object holds exactly our bytes (each lease body carries a fresh random token).
"""

from __future__ import annotations

import threading
import uuid

from pipelines.config import LEASES_DIR, Config
from pipelines.errors import ConfigError
from pipelines.lake.s3_client import S3Client, S3Location, S3Settings, parse_s3_url

__all__ = ["S3LeaseStore", "s3_store", "s3_stages", "probe_conditional_put"]

_GEN_WIDTH = 20
_LEASES = LEASES_DIR
_PROBED: set[tuple[str, str, str]] = set()
_PROBE_LOCK = threading.Lock()


class S3LeaseStore:
    """One stage's lease objects under ``s3://bucket/<prefix>/``; the calls of
    :class:`pipelines.lake.lease.LocalLeaseStore`, on conditional PUTs."""

    def __init__(self, client: S3Client, prefix: str) -> None:
        self.client, self.prefix = client, prefix.strip("/")
        self.dir = f"s3://{client.bucket}/{self.prefix}"
        self._etags: dict[int, str] = {}  # generation → ETag of the version this store wrote

    def _key(self, gen: int) -> str:
        return f"{self.prefix}/{gen:0{_GEN_WIDTH}d}.json"

    def generations(self) -> list[int]:
        out = []
        for key in self.client.list(self.prefix + "/"):
            name = key[len(self.prefix) + 1:]
            if "/" not in name and name.endswith(".json") and name[:-5].isdigit():
                out.append(int(name[:-5]))
        return sorted(out)

    def read(self, gen: int) -> bytes | None:
        got = self.client.get(self._key(gen))
        return None if got is None else got[0]

    def _ours(self, gen: int, data: bytes) -> bool:
        """After a failed condition: True when the object holds our bytes (a lost answer)."""
        got = self.client.get(self._key(gen))
        if got is None or got[0] != data:
            return False
        self._etags[gen] = got[1]
        return True

    def create(self, gen: int, data: bytes) -> bool:
        """Write generation ``gen`` unless it exists; True when this call created it."""
        etag = self.client.put(self._key(gen), data, if_none_match=True)
        if etag is None:
            return self._ours(gen, data)
        self._etags[gen] = etag
        return True

    def replace(self, gen: int, data: bytes) -> bool:
        """Rewrite our own generation ``gen``; False when it is no longer the version we wrote."""
        etag = self._etags.get(gen)
        if etag is None:
            return False  # not written by this store: never overwrite another writer's lease
        new = self.client.put(self._key(gen), data, if_match=etag)
        if new is None:
            return self._ours(gen, data)
        self._etags[gen] = new
        return True

    def delete(self, gen: int) -> None:
        self.client.delete(self._key(gen))
        self._etags.pop(gen, None)


def _client(cfg: Config) -> tuple[S3Client, S3Location]:
    loc = parse_s3_url(cfg.lake.root)
    return S3Client(S3Settings.resolve(cfg.storage), loc.bucket), loc


def s3_store(cfg: Config, stage: str) -> S3LeaseStore:
    """The lease store of ``stage`` on the ``s3://`` lake root, probed once per process."""
    client, loc = _client(cfg)
    probe_conditional_put(client, loc.key(_LEASES, ".probe"))
    return S3LeaseStore(client, loc.key(_LEASES, stage))


def s3_stages(cfg: Config) -> dict[str, S3LeaseStore]:
    """Every stage that has lease objects on the ``s3://`` lake root (for ``binlake status``)."""
    client, loc = _client(cfg)
    base = loc.key(_LEASES) + "/"
    stages = sorted({k[len(base):].split("/", 1)[0] for k in client.list(base)
                     if "/" in k[len(base):]})
    return {s: S3LeaseStore(client, base + s) for s in stages if not s.startswith(".")}


def probe_conditional_put(client: S3Client, prefix: str) -> None:
    """Refuse a store that does not honour ``If-None-Match: *`` and ``If-Match`` on PUT.

    Writes, re-creates, conditionally replaces and deletes one object under ``prefix``; done
    once per process, endpoint and bucket. Raises :class:`ConfigError` naming ``lake.root``.
    """
    ident = (client.settings.endpoint, client.bucket, prefix)
    with _PROBE_LOCK:
        if ident in _PROBED:
            return
        key = f"{prefix}/{uuid.uuid4().hex}"
        try:
            first = client.put(key, b"{}", if_none_match=True)
            again = client.put(key, b"{}", if_none_match=True)
            wrong = client.put(key, b"{}", if_match='"00000000000000000000000000000000"')
            right = client.put(key, b"{}", if_match=first) if first else None
        finally:
            client.delete(key)
        failed = [what for what, bad in (
            ("a first PUT with If-None-Match: * was refused", first is None),
            ("a second PUT with If-None-Match: * on the same key succeeded", again is not None),
            ("a PUT with If-Match of a wrong ETag succeeded", wrong is not None),
            ("a PUT with If-Match of the current ETag was refused", right is None)) if bad]
        if failed:
            raise ConfigError(
                f"lake.root s3://{client.bucket}/{prefix.rsplit('/' + _LEASES, 1)[0]}: the object "
                f"store at {client.settings.endpoint} does not honour conditional PUTs "
                f"({'; '.join(failed)}), so the lake lease cannot keep one writer per stage "
                "there; use a store with conditional writes (AWS S3, MinIO) or a mounted "
                "filesystem path (docs/concurrency.md)")
        _PROBED.add(ident)
