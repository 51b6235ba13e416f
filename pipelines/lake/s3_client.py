"""A small S3 client: the calls the object-store lease and binlogs on a store need (SigV4).

Speaks the S3 REST API (AWS, MinIO, Cloudflare R2, Ceph RGW …) over ``http.client``:
conditional ``PutObject`` (``If-None-Match: *`` creates only when absent, ``If-Match: ETAG``
replaces only the version we wrote), ``GetObject`` (whole, or a byte range: binlogs are
read in place, ``binlog/store.py``), ``ListObjectsV2`` and ``DeleteObject``. No SDK:
the package list is fixed.

Settings (:class:`S3Settings`), each from the ``[storage]`` section of the configuration,
else the usual AWS environment variable:

=====================  ==============================================  =====================
``storage.``           environment                                     default
=====================  ==============================================  =====================
``endpoint``           ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``     AWS S3 of the region
``region``             ``AWS_REGION``, ``AWS_DEFAULT_REGION``            ``us-east-1``
``access_key_id``      ``AWS_ACCESS_KEY_ID``                             (required)
``secret_access_key``  ``AWS_SECRET_ACCESS_KEY``                         (required)
``session_token``      ``AWS_SESSION_TOKEN``                             none
=====================  ==============================================  =====================

Plain HTTP is used only when the endpoint itself says ``http://`` (a local MinIO); otherwise
HTTPS with the system's CAs (``AWS_CA_BUNDLE`` names another bundle). An explicit endpoint is
addressed path-style (``endpoint/bucket/key``, what MinIO and R2 expect); AWS itself
virtual-hosted (``bucket.s3.region.amazonaws.com/key``). The secret key and session token are
never put in a message, a log line or a ``repr``.

Errors: a refused credential or a missing bucket is a :class:`ConfigError` naming the setting;
anything else the store answers (or a connection that fails after retries) is a
:class:`LakeFaultError` naming the bucket, the key, the HTTP status and S3's error code.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import http.client
import os
import re
import ssl
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import quote, urlsplit

from pipelines.errors import ConfigError, LakeFaultError

__all__ = ["S3Settings", "S3Location", "S3Client", "parse_s3_url", "sign_v4", "is_s3_url",
           "export_engine_env"]

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_RETRIES = 4  # attempts for a connection error or a 5xx answer (0.2 s, 0.4 s, 0.8 s apart)
_TIMEOUT_S = 30.0


def is_s3_url(root: str) -> bool:
    return root.startswith(("s3://", "s3a://"))


@dataclass(frozen=True)
class S3Location:
    """``s3://bucket/prefix``: the bucket and the key prefix (no leading or trailing ``/``)."""

    bucket: str
    prefix: str

    def key(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))

    def url(self, *parts: str) -> str:
        return f"s3://{self.bucket}/{self.key(*parts)}"


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def parse_s3_url(url: str, *, setting: str = "lake.root") -> S3Location:
    """``s3://bucket/prefix`` (or ``s3a://``) → :class:`S3Location`; ConfigError otherwise."""
    if "@" in url.split("://", 1)[-1].split("/", 1)[0]:  # never echo what may be a secret
        raise ConfigError(f"{setting}: no credentials in an s3:// URL; give them in [storage] "
                          "or as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY")
    parts = urlsplit(url)
    if parts.scheme not in ("s3", "s3a") or not parts.netloc:
        raise ConfigError(f"{setting}: expected s3://bucket/prefix, got {url!r}")
    if not _BUCKET.match(parts.netloc):
        raise ConfigError(f"{setting}: {parts.netloc!r} is not a valid S3 bucket name ({url})")
    if parts.query or parts.fragment:
        raise ConfigError(f"{setting}: no ?query or #fragment in an S3 lake root ({url})")
    return S3Location(parts.netloc, parts.path.strip("/"))


@dataclass(frozen=True)
class S3Settings:
    """Where and as whom to talk S3 (see the module docstring for the sources)."""

    endpoint: str  # scheme://host[:port], no path
    region: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)
    path_style: bool = True
    ca_bundle: str = ""

    @classmethod
    def resolve(cls, storage: object | None = None,
                env: Mapping[str, str] | None = None) -> "S3Settings":
        """From the ``[storage]`` section (any object with its attributes) and the environment."""
        env = os.environ if env is None else env

        def pick(key: str, *names: str) -> str:
            value = getattr(storage, key, "") if storage is not None else ""
            for name in names:
                value = value or env.get(name, "")
            return value.strip()

        region = pick("region", "AWS_REGION", "AWS_DEFAULT_REGION") or "us-east-1"
        endpoint = pick("endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
        path_style = bool(endpoint)
        endpoint = endpoint or f"https://s3.{region}.amazonaws.com"
        ep = urlsplit(endpoint)
        if ep.scheme not in ("http", "https") or not ep.netloc or ep.path not in ("", "/"):
            raise ConfigError(f"storage.endpoint: expected http(s)://host[:port], got {endpoint!r} "
                              "(or AWS_ENDPOINT_URL)")
        key_id = pick("access_key_id", "AWS_ACCESS_KEY_ID")
        secret = pick("secret_access_key", "AWS_SECRET_ACCESS_KEY")
        if not key_id or not secret:
            raise ConfigError("storage.access_key_id / storage.secret_access_key: an s3:// lake "
                              "needs credentials (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                              "in the environment)")
        # Keys from [storage] never pair with a token of another identity in the environment.
        token = (pick("session_token") if getattr(storage, "access_key_id", "")
                 else pick("session_token", "AWS_SESSION_TOKEN"))
        return cls(f"{ep.scheme}://{ep.netloc}", region, key_id, secret, token, path_style,
                   env.get("AWS_CA_BUNDLE", ""))

    def environment(self) -> dict[str, str]:
        """These settings as the AWS variables :meth:`resolve` reads (for a child process
        only: the values include the secret)."""
        env = {"AWS_REGION": self.region, "AWS_ACCESS_KEY_ID": self.access_key_id,
               "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if self.path_style:  # an explicit endpoint (AWS's own is derived from the region)
            env["AWS_ENDPOINT_URL"] = self.endpoint
        if self.session_token:
            env["AWS_SESSION_TOKEN"] = self.session_token
        if self.ca_bundle:
            env["AWS_CA_BUNDLE"] = self.ca_bundle
        return env


def export_engine_env(storage: object, root: str, env: dict[str, str] | None = None) -> None:
    """Hand the ``[storage]`` settings of an ``s3://`` lake to the engine and delta-rs.

    The embedded Sail and delta-rs read the standard ``AWS_*`` variables of this process, so
    the resolved settings are put there (settings given in ``[storage]`` win over the
    environment), with ``AWS_ALLOW_HTTP=true`` when the endpoint is ``http://`` (both refuse
    plain HTTP otherwise). Nothing is logged. No-op for a lake root that is not ``s3://``.
    """
    if not is_s3_url(root):
        return
    parse_s3_url(root)
    env = os.environ if env is None else env
    s = S3Settings.resolve(storage, env)
    env.update({"AWS_ACCESS_KEY_ID": s.access_key_id, "AWS_REGION": s.region,
                "AWS_SECRET_ACCESS_KEY": s.secret_access_key})
    if s.session_token:
        env["AWS_SESSION_TOKEN"] = s.session_token
    else:  # a token of another identity must not pair with these keys
        env.pop("AWS_SESSION_TOKEN", None)
    if s.path_style:  # an explicit endpoint (MinIO, R2 …): path-style requests to it
        env["AWS_ENDPOINT_URL"] = s.endpoint
        env.setdefault("AWS_ALLOW_HTTP", "true" if s.endpoint.startswith("http://") else "false")


def _uri_encode(text: str, *, encode_slash: bool) -> str:
    return quote(text, safe="-_.~" if encode_slash else "-_.~/")


def _query_string(query: Mapping[str, str]) -> str:
    """SigV4's canonical query string (also what is sent): sorted, every part encoded."""
    return "&".join(f"{_uri_encode(k, encode_slash=True)}={_uri_encode(v, encode_slash=True)}"
                    for k, v in sorted(query.items()))


def sign_v4(settings: S3Settings, method: str, host: str, path: str,
            query: Mapping[str, str], headers: Mapping[str, str], payload_sha256: str,
            now: dt.datetime) -> dict[str, str]:
    """The headers that sign a request with AWS Signature Version 4 (service ``s3``).

    ``path`` is already URI-encoded; ``headers`` are the extra headers to sign (lower-case
    names). Returns every header to send, ``Authorization`` included. Pure: a given clock
    gives the documented signature (tests/lake/test_lease_s3.py checks AWS's published example).
    """
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    signed = {"host": host, "x-amz-content-sha256": payload_sha256, "x-amz-date": amz_date}
    if settings.session_token:
        signed["x-amz-security-token"] = settings.session_token
    signed.update({k.lower(): str(v).strip() for k, v in headers.items()})
    names = sorted(signed)
    canonical = "\n".join([method, path, _query_string(query),
                           "".join(f"{n}:{signed[n]}\n" for n in names), ";".join(names),
                           payload_sha256])
    scope = f"{day}/{settings.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + settings.secret_access_key).encode()
    for part in (day, settings.region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out = {n: signed[n] for n in names if n != "host"}
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={settings.access_key_id}/{scope}, "
                            f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return out


@dataclass
class _Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class S3Client:
    """The calls on one bucket. Thread-safe: every request uses its own connection."""

    def __init__(self, settings: S3Settings, bucket: str) -> None:
        self.settings, self.bucket = settings, bucket
        ep = urlsplit(settings.endpoint)
        self._https = ep.scheme == "https"
        self._host = ep.netloc if settings.path_style else f"{bucket}.{ep.netloc}"
        self._tls = None
        if self._https:
            try:
                self._tls = ssl.create_default_context(cafile=settings.ca_bundle or None)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"AWS_CA_BUNDLE {settings.ca_bundle}: cannot read it as "
                                  f"PEM certificates ({exc})") from None

    def __repr__(self) -> str:
        return f"S3Client({self.settings.endpoint!r}, bucket={self.bucket!r})"

    # -- the calls -------------------------------------------------------------------------

    def put(self, key: str, data: bytes, *, if_none_match: bool = False,
            if_match: str | None = None, content_type: str = "application/json") -> str | None:
        """PutObject; the new ETag, or None when the condition failed (412, or 409 for a
        conditional write racing another one)."""
        headers = {"content-type": content_type}
        if if_none_match:
            headers["if-none-match"] = "*"
        if if_match is not None:
            headers["if-match"] = if_match
        ans = self._call("PUT", key, body=data, headers=headers,
                         ok=(200,), soft=(412, 409) if (if_none_match or if_match) else ())
        if ans.status != 200:
            return None
        return ans.headers.get("etag", "")

    def get(self, key: str) -> tuple[bytes, str] | None:
        """GetObject: (body, ETag), or None when there is no such key."""
        ans = self._call("GET", key, ok=(200,), soft=(404,))
        return None if ans.status == 404 else (ans.body, ans.headers.get("etag", ""))

    def get_range(self, key: str, start: int, length: int) -> bytes | None:
        """GetObject of ``length`` bytes from ``start`` (fewer at the object's end, none past
        it), or None when there is no such key."""
        if length <= 0:
            return b""
        ans = self._call("GET", key, headers={"range": f"bytes={start}-{start + length - 1}"},
                         ok=(200, 206), soft=(404, 416))
        if ans.status == 404:
            return None
        if ans.status == 416:  # the range starts at or past the end
            return b""
        if ans.status == 200:  # a store that ignores Range sends the whole object
            return ans.body[start:start + length]
        return ans.body

    def copy(self, source_key: str, key: str) -> None:
        """CopyObject within the bucket (server side: the bytes do not travel here)."""
        self._call("PUT", key, ok=(200,), signed={
            "x-amz-copy-source": _uri_encode(f"/{self.bucket}/{source_key}",
                                             encode_slash=False)})

    def create_bucket(self) -> None:
        """CreateBucket (tests and ``devtools/minio.py``; binlake never creates buckets)."""
        self._call("PUT", "", ok=(200,))

    def delete(self, key: str) -> None:
        self._call("DELETE", key, ok=(200, 204), soft=(404,))

    def list(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (ListObjectsV2, following continuation tokens)."""
        return list(self.sizes(prefix))

    def sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` with its size in bytes, in key order."""
        keys: dict[str, int] = {}
        token = ""
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            ans = self._call("GET", "", query=query, ok=(200,),
                             where=f"s3://{self.bucket}/{prefix}*")
            root = ET.fromstring(ans.body)
            ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            for item in root.iter(f"{ns}Contents"):
                keys[item.findtext(f"{ns}Key") or ""] = int(item.findtext(f"{ns}Size") or 0)
            if (root.findtext(f"{ns}IsTruncated") or "").lower() != "true":
                return keys
            token = root.findtext(f"{ns}NextContinuationToken") or ""

    # -- one request -----------------------------------------------------------------------

    def _path(self, key: str) -> str:
        path = f"/{self.bucket}/{key}" if self.settings.path_style else f"/{key}"
        return _uri_encode(path, encode_slash=False)

    def _call(self, method: str, key: str, *, body: bytes = b"",
              query: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None,
              ok: tuple[int, ...], soft: tuple[int, ...] = (), where: str = "",
              signed: Mapping[str, str] | None = None) -> _Answer:
        where = where or f"s3://{self.bucket}/{key}"
        query = dict(query or {})
        path = self._path(key)
        target = path + ("?" + _query_string(query) if query else "")
        payload = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
        error: str = ""
        for attempt in range(_RETRIES):
            if attempt:
                time.sleep(0.2 * 2 ** (attempt - 1))
            # Only host and x-amz-* are signed (what SigV4 requires); the conditional headers
            # travel unsigned, so a store that drops them is caught by the lease's probe.
            auth = sign_v4(self.settings, method, self._host, path, query, signed or {},
                           payload, dt.datetime.now(dt.timezone.utc))
            try:
                ans = self._send(method, target, body, {**auth, **(headers or {})})
            except ssl.SSLCertVerificationError as exc:  # no retry can help
                raise ConfigError(
                    f"{method} {where}: the certificate of {self.settings.endpoint} is not "
                    f"trusted ({exc.verify_message or exc}); check storage.endpoint, or name "
                    "the CA bundle that signed it in AWS_CA_BUNDLE") from None
            except (OSError, http.client.HTTPException) as exc:
                error = f"cannot reach {self.settings.endpoint}: {exc}"
                continue
            if ans.status == 404 and _error_code(ans.body) == "NoSuchBucket":
                self._refuse(method, where, ans)
            if ans.status in ok or ans.status in soft:
                return ans
            if ans.status >= 500 or ans.status == 429:
                error = _describe(ans)
                continue
            self._refuse(method, where, ans)
        raise LakeFaultError(f"{method} {where}: {error} (after {_RETRIES} attempts)")

    def _send(self, method: str, target: str, body: bytes, headers: dict[str, str]) -> _Answer:
        if self._https:
            conn = http.client.HTTPSConnection(self._host, timeout=_TIMEOUT_S,
                                               context=self._tls)
        else:
            conn = http.client.HTTPConnection(self._host, timeout=_TIMEOUT_S)
        try:
            conn.request(method, target, body=body or None,
                         headers={**headers, "content-length": str(len(body))})
            resp = conn.getresponse()
            data = resp.read()
            return _Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def _refuse(self, method: str, where: str, ans: _Answer) -> None:
        what = _describe(ans)
        code = _error_code(ans.body)
        if ans.status in (401, 403) or code in ("InvalidAccessKeyId", "SignatureDoesNotMatch",
                                                 "ExpiredToken", "InvalidToken"):
            raise ConfigError(
                f"{method} {where}: the store refused the credentials ({what}); check "
                "storage.access_key_id / storage.secret_access_key / storage.session_token "
                "(or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN) and "
                "storage.region")
        if code == "NoSuchBucket":
            raise ConfigError(f"lake.root: bucket {self.bucket!r} does not exist at "
                              f"{self.settings.endpoint} ({what})")
        raise LakeFaultError(f"{method} {where}: {what}")


def _error_code(body: bytes) -> str:
    try:
        return ET.fromstring(body).findtext("Code") or ""
    except ET.ParseError:
        return ""


def _describe(ans: _Answer) -> str:
    """``HTTP 412 PreconditionFailed: message`` from an S3 error answer."""
    code, message = "", ""
    try:
        root = ET.fromstring(ans.body)
        code, message = root.findtext("Code") or "", root.findtext("Message") or ""
    except ET.ParseError:
        message = ans.body[:200].decode("utf-8", "replace")
    text = f"HTTP {ans.status}"
    if code:
        text += f" {code}"
    if message:
        text += f": {message}"
    return text
