"""The lake lease on an object store (``s3://``), against a real MinIO server.

The store's primitives (a create race between processes has exactly one winner, a replace
with a stale ETag fails, listing and reading), the refusal of a store without conditional
PUTs, credentials and their errors, and the lease's semantics on it: a second writer waits
or refuses naming the holder, a holder killed with SIGKILL on another host blocks only until
its expiry, the heartbeat renews, a stalled holder learns it lost the lease.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from devtools.minio import MinioServer
from pipelines.config import load_config
from pipelines.errors import ConfigError, LeaseHeldError
from pipelines.lake.lease import Lease, LocalLeaseStore, _store, current_holders
from pipelines.lake.lease_s3 import S3LeaseStore
from pipelines.lake.s3_client import S3Client, S3Settings, sign_v4
from tests.support.lake_runs import ROOT

pytestmark = [pytest.mark.minio]


@pytest.fixture(scope="module")
def minio():
    with MinioServer() as server:
        yield server


@pytest.fixture(scope="module")
def bucket(minio) -> str:
    return minio.make_bucket()


@pytest.fixture
def root(bucket) -> str:
    """A fresh lake root in the module's bucket."""
    return f"s3://{bucket}/lakes/{uuid.uuid4().hex[:10]}"


def _cfg(minio, root: str, **lease):
    """A config naming the store through the [storage] keys (subprocesses use AWS_* env)."""
    return load_config(env={}, overrides={
        "lake.root": root, "storage.endpoint": minio.endpoint, "storage.region": minio.region,
        "storage.access_key_id": minio.user, "storage.secret_access_key": minio.secret,
        **{f"lease.{k}": v for k, v in lease.items()}})


def _client(minio, bucket: str) -> S3Client:
    return S3Client(S3Settings.resolve(env=minio.env()), bucket)


def _env(minio) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BINLAKE_", "AWS_"))}
    return dict(env, PYTHONPATH=str(ROOT), **minio.env())


def _quiet(_msg: str) -> None:
    pass


# -- signing, settings and errors ------------------------------------------------------------

def test_sigv4_gives_the_signature_of_awss_published_example() -> None:
    """AWS's SigV4 documentation example: GET /test.txt with a Range header."""
    settings = S3Settings("https://examplebucket.s3.amazonaws.com", "us-east-1",
                          "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    headers = sign_v4(settings, "GET", "examplebucket.s3.amazonaws.com", "/test.txt", {},
                      {"range": "bytes=0-9"}, empty,
                      dt.datetime(2013, 5, 24, tzinfo=dt.timezone.utc))
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


def test_settings_come_from_storage_keys_then_aws_env_and_hide_the_secret(minio) -> None:
    cfg = _cfg(minio, "s3://b-1/x")
    assert minio.secret not in repr(cfg) and minio.secret not in repr(
        S3Settings.resolve(cfg.storage, env={}))
    from_env = S3Settings.resolve(env=dict(minio.env(), AWS_REGION="eu-west-3"))
    assert (from_env.endpoint, from_env.region, from_env.path_style) == (
        minio.endpoint, "eu-west-3", True)
    aws = S3Settings.resolve(env={"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    assert (aws.endpoint, aws.path_style) == ("https://s3.us-east-1.amazonaws.com", False)
    with pytest.raises(ConfigError, match="storage.access_key_id"):
        S3Settings.resolve(env={})
    with pytest.raises(ConfigError, match="storage.endpoint"):
        S3Settings.resolve(env=dict(minio.env(), AWS_ENDPOINT_URL="ftp://host:21"))


def test_the_engine_gets_the_resolved_settings_as_aws_env(minio) -> None:
    from pipelines.lake.s3_client import export_engine_env

    cfg = _cfg(minio, "s3://b-1/lake")
    env = {"AWS_SESSION_TOKEN": "of-another-identity"}
    export_engine_env(cfg.storage, cfg.lake.root, env)
    assert env == {"AWS_ACCESS_KEY_ID": minio.user, "AWS_SECRET_ACCESS_KEY": minio.secret,
                   "AWS_REGION": minio.region, "AWS_ENDPOINT_URL": minio.endpoint,
                   "AWS_ALLOW_HTTP": "true"}, "no token of another identity with these keys"
    untouched: dict[str, str] = {}
    export_engine_env(cfg.storage, "/data/lake", untouched)
    assert untouched == {}


def test_refused_credentials_and_a_missing_bucket_are_config_errors(minio, bucket) -> None:
    wrong = "not-the-secret-" + uuid.uuid4().hex
    bad = S3Client(S3Settings.resolve(env=dict(minio.env(), AWS_SECRET_ACCESS_KEY=wrong)),
                   bucket)
    with pytest.raises(ConfigError) as exc:
        bad.list("lakes/")
    text = str(exc.value)
    assert "HTTP 403" in text and "storage.secret_access_key" in text and bucket in text
    assert wrong not in text and minio.secret not in text
    with pytest.raises(ConfigError, match="lake.root: bucket 'no-such-bucket' does not exist"):
        _client(minio, "no-such-bucket").get("x")


def test_lake_root_urls_are_checked_without_echoing_credentials() -> None:
    from pipelines.lake.s3_client import parse_s3_url

    loc = parse_s3_url("s3://my-bucket/a/b/")
    assert (loc.bucket, loc.prefix, loc.key("_binlake", "leases")) == (
        "my-bucket", "a/b", "a/b/_binlake/leases")
    with pytest.raises(ConfigError) as exc:
        parse_s3_url("s3://AKIDEXAMPLE:hush-hush@my-bucket/lake")
    assert "hush-hush" not in str(exc.value) and "[storage]" in str(exc.value)
    for bad in ("s3://Bad_Bucket/x", "s3:///x", "s3://b-1/x?versionId=2"):
        with pytest.raises(ConfigError, match="lake.root"):
            parse_s3_url(bad)


def test_store_follows_the_lake_roots_scheme(minio, root, tmp_path) -> None:
    assert isinstance(_store(_cfg(minio, root), "silver"), S3LeaseStore)
    local = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    assert isinstance(_store(local, "silver"), LocalLeaseStore)
    gcs = load_config(env={}, overrides={"lake.root": "gs://bucket/lake"})
    with pytest.raises(ConfigError, match="lake.root gs://bucket/lake"):
        _store(gcs, "silver")


# -- the store's primitives -------------------------------------------------------------------

_RACE = """
import json, sys, time
from pipelines.lake.lease_s3 import S3LeaseStore
from pipelines.lake.s3_client import S3Client, S3Settings
bucket, prefix, me = sys.argv[1:4]
t0, rounds = float(sys.argv[4]), int(sys.argv[5])
store = S3LeaseStore(S3Client(S3Settings.resolve(), bucket), prefix)
print("late" if time.time() > t0 else "ready", flush=True)
for r in range(rounds):
    time.sleep(max(0.0, t0 + r * 0.3 - time.time()))
    if store.create(r + 1, json.dumps({"who": me, "round": r}).encode()):
        print(r + 1, flush=True)
"""


def test_create_race_between_processes_has_exactly_one_winner(minio, bucket) -> None:
    prefix, rounds, n = f"race/{uuid.uuid4().hex}", 12, 5
    t0 = time.time() + 8
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, bucket, prefix, f"p{i}", str(t0),
                               str(rounds)], env=_env(minio), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(n)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert all(o.splitlines()[0] == "ready" for o, _ in outs), "a contender started late"
    wins = {f"p{i}": [int(x) for x in o.splitlines()[1:]] for i, (o, _) in enumerate(outs)}
    store = S3LeaseStore(_client(minio, bucket), prefix)
    assert store.generations() == list(range(1, rounds + 1))
    for gen in range(1, rounds + 1):
        winners = [who for who, gens in wins.items() if gen in gens]
        assert len(winners) == 1, (gen, wins)
        assert json.loads(store.read(gen))["who"] == winners[0]


def test_replace_needs_the_etag_this_store_wrote(minio, bucket) -> None:
    prefix = f"replace/{uuid.uuid4().hex}"
    mine = S3LeaseStore(_client(minio, bucket), prefix)
    other = S3LeaseStore(_client(minio, bucket), prefix)
    assert mine.create(1, b'{"v": 1}') and not other.create(1, b'{"v": "other"}')
    assert other.replace(1, b'{"v": "other"}') is False, "never overwrite another's lease"
    assert mine.replace(1, b'{"v": 2}') is True and mine.replace(1, b'{"v": 3}') is True
    stale = mine._etags[1]
    client = _client(minio, bucket)
    client.put(f"{prefix}/{1:020d}.json", b'{"v": "someone else"}')  # unconditional writer
    assert mine.replace(1, b'{"v": 4}') is False
    assert client.put(f"{prefix}/{1:020d}.json", b"x", if_match=stale) is None
    assert mine.read(1) == b'{"v": "someone else"}'


def test_list_read_and_delete(minio, bucket) -> None:
    prefix = f"list/{uuid.uuid4().hex}"
    store = S3LeaseStore(_client(minio, bucket), prefix)
    assert store.generations() == [] and store.read(1) is None
    for gen in (3, 1, 2):
        assert store.create(gen, f'{{"g": {gen}}}'.encode())
    client = _client(minio, bucket)
    client.put(f"{prefix}/notes.txt", b"not a lease")
    client.put(f"{prefix}/sub/00000000000000000009.json", b"{}")
    client.put(f"{prefix}0/00000000000000000008.json", b"{}")  # a sibling prefix
    assert store.generations() == [1, 2, 3]
    assert store.read(2) == b'{"g": 2}'
    store.delete(1)
    store.delete(1)  # deleting what is gone is fine
    assert store.generations() == [2, 3]


def test_a_store_ignoring_conditional_puts_is_refused(minio, bucket) -> None:
    from pipelines.lake import lease_s3
    from tests.support.s3_proxy import S3Proxy

    with S3Proxy(minio.endpoint, strip_conditions=True) as proxy:
        url = proxy.url
        root = f"s3://{bucket}/lakes/{uuid.uuid4().hex[:10]}"
        cfg = load_config(env={}, overrides={
            "lake.root": root, "storage.endpoint": url,
            "storage.access_key_id": minio.user, "storage.secret_access_key": minio.secret})
        blind = S3LeaseStore(S3Client(S3Settings.resolve(cfg.storage, env={}), bucket), "p")
        assert blind.client.put("p/x", b"1", if_none_match=True)
        assert blind.client.put("p/x", b"2", if_none_match=True), "the proxy drops conditions"
        lease_s3._PROBED.clear()
        with pytest.raises(ConfigError) as exc:
            _store(cfg, "silver")
    text = str(exc.value)
    assert f"lake.root {root}" in text and "does not honour conditional PUTs" in text
    assert "second PUT with If-None-Match" in text and "wrong ETag succeeded" in text
    assert _client(minio, bucket).list(root.split("/", 3)[3] + "/") == [], "probe cleaned up"


def test_a_conditional_put_whose_answer_was_lost_counts_when_the_object_is_ours(
        minio, bucket) -> None:
    """The store wrote, the answer never came: the retry gets 412 and the store reads the
    object back; our bytes → won, another writer's bytes → lost."""
    from tests.support.s3_proxy import S3Proxy

    prefix = f"lost-answer/{uuid.uuid4().hex}"
    with S3Proxy(minio.endpoint) as proxy:
        via = S3Client(S3Settings.resolve(env=dict(minio.env(), AWS_ENDPOINT_URL=proxy.url)),
                       bucket)
        mine = S3LeaseStore(via, prefix)
        proxy.lose_answers = 1
        assert mine.create(1, b'{"v": "mine"}') and proxy.lost == 1
        proxy.lose_answers = 1
        assert mine.replace(1, b'{"v": "renewed"}') is True and proxy.lost == 2
        assert mine.replace(1, b'{"v": "again"}') is True, "the read-back ETag is current"
        other = S3LeaseStore(via, prefix)
        proxy.lose_answers = 1
        assert not other.create(1, b'{"v": "other"}')  # 412 for real: someone else's bytes
        assert mine.read(1) == b'{"v": "again"}'


# -- the lease on the object store ------------------------------------------------------------

_CONTEND = """
import os, sys, time
from pipelines.config import load_config
from pipelines.errors import LeaseHeldError
from pipelines.lake.lease import lake_lease
cfg = load_config(env={}, overrides={"lake.root": sys.argv[1], "lease.wait_seconds": sys.argv[2],
                                     "lease.expiry_seconds": 6})
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))
try:
    with lake_lease(cfg, "silver", "contender " + str(os.getpid())):
        t = time.time()
        time.sleep(1.5)
        print("held", t, time.time(), flush=True)
except LeaseHeldError as exc:
    print("refused", exc, flush=True)
    sys.exit(75)
"""


def _contend(minio, root: str, wait: int) -> list[tuple[subprocess.Popen, str, str]]:
    t0 = str(time.time() + 6)
    procs = [subprocess.Popen([sys.executable, "-c", _CONTEND, root, str(wait), t0],
                              env=_env(minio), text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    return [(p, *p.communicate(timeout=120)) for p in procs]


def test_two_processes_at_once_one_refuses_naming_the_holder(minio, root) -> None:
    res = _contend(minio, root, wait=0)
    won = [(p, out) for p, out, _ in res if p.returncode == 0]
    lost = [(p, out) for p, out, _ in res if p.returncode == 75]
    assert len(won) == 1 and len(lost) == 1, res
    message = lost[0][1]
    for fact in (f"pid {won[0][0].pid}", f"contender {won[0][0].pid}", "since 20",
                 "silver lease at s3://", "gave up after waiting 0s"):
        assert fact in message, (fact, message)


def test_two_processes_at_once_the_second_waits_for_the_first(minio, root) -> None:
    res = _contend(minio, root, wait=60)
    assert all(p.returncode == 0 for p, _, _ in res), res
    spans = sorted(tuple(map(float, out.split()[1:3])) for _, out, _ in res)
    assert spans[0][1] <= spans[1][0], f"the two held the lease at once: {spans}"
    waited = [err for _, _, err in res if "is being written by" in err]
    assert len(waited) == 1, res
    first = next(p for p, out, _ in res if float(out.split()[1]) == spans[0][0])
    assert f"pid {first.pid}" in waited[0]


_HOLD = """
import socket, sys, time
if sys.argv[3]:
    socket.gethostname = lambda: sys.argv[3]  # plays a process on another machine
from pipelines.config import load_config
from pipelines.lake.lease import lake_lease
cfg = load_config(env={}, overrides={"lake.root": sys.argv[1],
                                     "lease.expiry_seconds": int(sys.argv[4])})
with lake_lease(cfg, sys.argv[2], "test holder of " + sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def _holder(minio, root: str, stage: str, *, host: str = "", expiry: int = 6
            ) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, root, stage, host, str(expiry)],
                            env=_env(minio), text=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _holder_file(store: S3LeaseStore) -> dict:
    return json.loads(store.read(store.generations()[-1]))


def test_holder_killed_on_another_host_blocks_only_until_its_expiry(minio, root) -> None:
    cfg = _cfg(minio, root)
    holder = _holder(minio, root, "silver", host="elsewhere", expiry=6)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    store = _store(cfg, "silver")
    expires = _holder_file(store)["expires"]
    with pytest.raises(LeaseHeldError, match=f"host elsewhere pid {holder.pid}"):
        Lease(store, "silver", "me", expiry=6, wait=0, say=_quiet).acquire()
    told: list[str] = []
    lease = Lease(store, "silver", "me", expiry=6, wait=60, say=told.append)
    me = lease.acquire()
    took = time.time()
    lease.release()
    assert expires <= took < expires + 5, (expires, took)
    assert me.generation == 2 and "host elsewhere" in told[0]


def test_heartbeat_renews_the_lease_beyond_its_expiry(minio, root) -> None:
    cfg = _cfg(minio, root)
    holder = _holder(minio, root, "bronze", host="elsewhere", expiry=3)
    try:
        store = _store(cfg, "bronze")
        first = _holder_file(store)["expires"]
        time.sleep(4.5)  # beyond one expiry: only renewals keep it
        later = _holder_file(store)
        assert later["expires"] > first + 1 and later["generation"] == 1
        with pytest.raises(LeaseHeldError, match="host elsewhere"):
            Lease(store, "bronze", "me", expiry=3, wait=0, say=_quiet).acquire()
        held = {x["stage"]: x for x in current_holders(cfg)}
        assert held["bronze"]["state"] == "held" and held["bronze"]["host"] == "elsewhere"
        assert held["bronze"]["command"] == "test holder of bronze"
    finally:
        holder.kill()
        holder.wait()


def test_a_stalled_holder_learns_it_lost_the_lease(minio, root) -> None:
    store = _store(_cfg(minio, root), "silver")
    stalled = Lease(store, "silver", "stalled", expiry=3, wait=0, say=_quiet)
    stalled.acquire()
    stalled._stop.set()  # its heartbeat stops, as in a frozen VM
    stalled._beat.join()
    time.sleep(3.2)
    other = Lease(_store(_cfg(minio, root), "silver"), "silver", "other", expiry=3, wait=0,
                  say=_quiet)
    assert other.acquire().generation == 2
    stalled.renew()
    assert stalled.lost and "taken over" in stalled.lost and "other" in stalled.lost
    stalled.release()
    assert store.generations()[-1] == 2 and not json.loads(store.read(2))["released"]
    other.release()
    assert json.loads(store.read(2))["released"]


def test_a_holder_whose_lease_object_was_overwritten_learns_it_is_lost(minio, root, bucket
                                                                       ) -> None:
    store = _store(_cfg(minio, root), "silver")
    lease = Lease(store, "silver", "me", expiry=30, wait=0, say=_quiet)
    me = lease.acquire()
    _client(minio, bucket).put(store._key(me.generation), b'{"overwritten": true}')
    lease.renew()
    assert lease.lost and "rewritten by someone else" in lease.lost
    lease.release()
    assert store.read(me.generation) == b'{"overwritten": true}'


# -- other lake files on the store ------------------------------------------------------------

def test_lake_files_answer_alike_on_s3_and_on_a_filesystem(minio, bucket, tmp_path,
                                                           monkeypatch) -> None:
    from pipelines.lake.files import (delta_tables_under, lake_path_exists, list_lake_dir,
                                      move_lake_path, read_lake_file, write_lake_file)
    from pipelines.stream.progress import read_live, write_live

    for name, value in minio.env().items():
        monkeypatch.setenv(name, value)
    layout = ["a/b/_delta_log/00000000000000000000.json", "a/b/part-0.parquet",
              "a/c/part-0.parquet", "d/_delta_log/00000000000000000000.json", "e/f/g/x.json"]
    for base in (str(tmp_path / "lake"), f"s3://{bucket}/files/{uuid.uuid4().hex[:8]}"):
        for rel in layout:
            write_lake_file(None, f"{base}/{rel}", rel.encode())
        assert read_lake_file(f"{base}/a/c/part-0.parquet") == b"a/c/part-0.parquet", base
        with pytest.raises(FileNotFoundError):
            read_lake_file(f"{base}/a/c/none")
        assert delta_tables_under(base, 2) == [f"{base}/a/b"], base
        assert delta_tables_under(base, 1) == [f"{base}/d"], base
        assert sorted(list_lake_dir(f"{base}/a")) == ["b", "c"] and list_lake_dir(
            f"{base}/zz") is None, base
        move_lake_path(f"{base}/a", f"{base}/moved/a")
        assert not lake_path_exists(f"{base}/a") and lake_path_exists(f"{base}/moved/a/b")
        assert read_lake_file(f"{base}/moved/a/b/part-0.parquet") == b"a/b/part-0.parquet"
        live = f"{base}/bronze/stream_status/default.json"
        assert read_live(live) is None
        write_live(live, {"state": "running", "pos": 4})
        assert read_live(live)["state"] == "running" and read_live(live)["pos"] == 4


def test_a_store_gone_for_a_while_does_not_lose_a_renewed_lease(minio, root, caplog) -> None:
    """MinIO killed and restarted while a lease is held: renewals fail (logged), then go on;
    nobody else can take the stage meanwhile and the holder keeps its lease."""
    store = _store(_cfg(minio, root), "silver")
    # Heartbeat every 4 s; the store is down 6.5 s from just after the acquire, so the first
    # renewal (at 4 s, retried for 1.4 s) surely fails and the second (~9.4 s) lands before
    # the 12 s expiry.
    lease = Lease(store, "silver", "me", expiry=12, wait=0, say=_quiet)
    me = lease.acquire()
    with caplog.at_level("WARNING", logger="pipelines.lake.lease"):
        minio.restart(down_seconds=6.5)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and lease.me.expires == me.expires:
            time.sleep(0.2)
    assert any("renewal failed" in r.message for r in caplog.records), "no renewal was missed"
    assert not lease.lost
    with pytest.raises(LeaseHeldError, match="'me'"):
        Lease(_store(_cfg(minio, root), "silver"), "silver", "other", expiry=6, wait=0,
              say=_quiet).acquire()
    assert json.loads(store.read(me.generation))["expires"] > me.expires
    lease.release()
    assert json.loads(store.read(me.generation))["released"]


def test_https_endpoint_verifies_the_store_certificate(tmp_path) -> None:
    """MinIO serving HTTPS with a certificate made at test time: the lease works with the CA
    that signed it (AWS_CA_BUNDLE) and is refused, naming the endpoint, with another CA."""
    from tests.support.tls import make_pki

    pki = make_pki(tmp_path / "pki")
    with MinioServer(tls=(pki.server_cert, pki.server_key)) as server:
        env = dict(server.env(), AWS_CA_BUNDLE=pki.ca)
        assert env["AWS_ENDPOINT_URL"].startswith("https://localhost:")
        bucket = f"tls-{uuid.uuid4().hex[:8]}"
        S3Client(S3Settings.resolve(env=env), bucket).create_bucket()
        store = S3LeaseStore(S3Client(S3Settings.resolve(env=env), bucket), "leases/silver")
        lease = Lease(store, "silver", "over tls", expiry=30, wait=0, say=_quiet)
        assert lease.acquire().generation == 1
        lease.release()
        wrong = S3Client(S3Settings.resolve(env=dict(env, AWS_CA_BUNDLE=pki.other_ca)), bucket)
        with pytest.raises(ConfigError) as exc:
            wrong.list("leases/")
        text = str(exc.value)
        assert server.endpoint in text and "not trusted" in text and "AWS_CA_BUNDLE" in text
        system = S3Client(S3Settings.resolve(env={k: v for k, v in env.items()
                                                  if k != "AWS_CA_BUNDLE"}), bucket)
        with pytest.raises(ConfigError, match="not trusted"):
            system.get("leases/silver/00000000000000000001.json")
        with pytest.raises(ConfigError, match="AWS_CA_BUNDLE .*nope.pem: cannot read"):
            S3Client(S3Settings.resolve(env=dict(env, AWS_CA_BUNDLE=str(tmp_path / "nope.pem"))),
                     bucket)
