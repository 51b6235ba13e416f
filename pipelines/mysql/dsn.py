"""A MySQL/MariaDB server as binlake's settings name it: DSNs, TLS, credentials, redaction.

DSN: ``mysql://user[:password]@host[:port]/[db]`` with optional query parameters
``?ssl_mode=…&ssl_ca=PATH&ssl_cert=PATH&ssl_key=PATH``.

TLS (``ssl_mode``, MySQL's client names): ``DISABLED`` plain; ``PREFERRED`` (the default
without ``ssl_ca``) TLS when the server offers it, certificate not checked; ``REQUIRED`` TLS or
fail, certificate not checked; ``VERIFY_CA`` (the default when ``ssl_ca`` is given) the chain
must verify against ``ssl_ca`` (else the system's CAs); ``VERIFY_IDENTITY`` also the host name
must be in the certificate. ``ssl_cert`` + ``ssl_key`` present a client certificate (users
created ``REQUIRE X509``). The SSL context is built here (:func:`ssl_context`), never left to
the driver's defaults: pymysql without settings negotiates TLS but verifies nothing.

Credentials (:func:`resolve_dsn`), first found wins: the DSN's own password; the section's
``password`` (``BINLAKE_SOURCE_PASSWORD`` / ``BINLAKE_GOLD_PASSWORD``); ``password_file`` (its
first line); the ``[client]`` section of ``defaults_file`` (``--defaults-file``), else of
``~/.my.cnf``. A password never appears in ``str``/``repr`` of a :class:`Dsn`, in error
messages (:func:`redact`) or in logs; :attr:`Dsn.password_from` says where it came from.
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field, replace
from typing import Mapping
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from pipelines.errors import ConfigError

__all__ = [
    "SSL_MODES", "Tls", "Dsn", "ServerSettings", "resolve_dsn", "DEFAULT_DATABASE", "database_of",
    "read_option_file", "redact", "redact_urls", "error_text", "ssl_context",
]

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
_TLS_KEYS = ("ssl_mode", "ssl_ca", "ssl_cert", "ssl_key")


@dataclass(frozen=True)
class Tls:
    """The TLS settings of one server; ``mode`` is one of :data:`SSL_MODES`."""

    mode: str = "PREFERRED"
    ca: str = ""
    cert: str = ""
    key: str = ""

    @classmethod
    def of(cls, values: Mapping[str, str], *, setting: str) -> "Tls":
        """From ``ssl_*`` keys (empty = unset); ConfigError names ``setting``.``key``."""
        ca, cert, key = (str(values.get(k) or "") for k in ("ssl_ca", "ssl_cert", "ssl_key"))
        mode = str(values.get("ssl_mode") or ("VERIFY_CA" if ca else "PREFERRED")).upper()
        if mode not in SSL_MODES:
            raise ConfigError(f"{setting}ssl_mode: expected one of {', '.join(SSL_MODES)}, "
                              f"got {values.get('ssl_mode')!r}")
        if bool(cert) != bool(key):
            raise ConfigError(f"{setting}ssl_cert and {setting}ssl_key go together "
                              "(a client certificate needs its key)")
        if mode == "DISABLED" and (ca or cert):
            raise ConfigError(f"{setting}ssl_mode: DISABLED contradicts ssl_ca/ssl_cert")
        return cls(mode, ca, cert, key)

    @property
    def verifies(self) -> bool:
        return self.mode in ("VERIFY_CA", "VERIFY_IDENTITY")


@dataclass(frozen=True)
class Dsn:
    """A MySQL/MariaDB DSN ``mysql://user:password@host:port/[db][?ssl_mode=…]``.

    The password never prints (``str`` is redacted, ``repr`` leaves it out).
    """

    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    database: str | None = None
    tls: Tls = Tls()
    user_given: bool = field(default=True, repr=False, compare=False)
    password_from: str = field(default="dsn", repr=False, compare=False)

    @classmethod
    def parse(cls, url: str, *, setting: str = "dsn") -> "Dsn":
        """Parse ``url``; :class:`ConfigError` names ``setting`` (never echoes the URL)."""
        parts = urlsplit(url)
        if parts.scheme not in ("mysql", "mariadb"):
            raise ConfigError(f"{setting}: expected mysql://user:password@host:port/[db], "
                              f"got scheme {parts.scheme!r}")
        try:
            port = parts.port or 3306
        except ValueError as exc:
            raise ConfigError(f"{setting}: invalid port") from exc
        if not parts.hostname:
            raise ConfigError(f"{setting}: no host in DSN")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(query) - set(_TLS_KEYS))
        if unknown:
            raise ConfigError(f"{setting}: unknown DSN parameter(s) {', '.join(unknown)} "
                              f"(known: {', '.join(_TLS_KEYS)})")
        db = parts.path.lstrip("/") or None
        return cls(parts.hostname, port, unquote(parts.username or "root"),
                   unquote(parts.password or ""), unquote(db) if db else None,
                   Tls.of(query, setting=f"{setting}: ?"), user_given=bool(parts.username),
                   password_from="dsn" if parts.password else "")

    def url(self) -> str:
        """The full URL again, password and TLS parameters included (for engine tasks)."""
        auth = quote(self.user, safe="")
        if self.password:
            auth += ":" + quote(self.password, safe="")
        out = f"mysql://{auth}@{self.host}:{self.port}/{quote(self.database or '', safe='')}"
        params = {k: v for k, v in (("ssl_mode", self.tls.mode), ("ssl_ca", self.tls.ca),
                                    ("ssl_cert", self.tls.cert), ("ssl_key", self.tls.key)) if v}
        return out + ("?" + urlencode(params) if params else "")

    def __str__(self) -> str:
        pw = ":***" if self.password else ""
        tls = "" if self.tls.mode == "PREFERRED" else f"?ssl_mode={self.tls.mode}"
        return f"mysql://{self.user}{pw}@{self.host}:{self.port}/{self.database or ''}{tls}"


@dataclass(frozen=True)
class ServerSettings:
    """A server's TLS and credential settings (docs/connections.md), declared once: the keys
    :func:`resolve_dsn` reads, the same in ``[source]`` and ``[gold]`` (their config sections
    are built on it); the DSN's ``?ssl_*`` parameters win."""

    ssl_mode: str = ""  # DISABLED | PREFERRED | REQUIRED | VERIFY_CA | VERIFY_IDENTITY
    ssl_ca: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""
    password: str = field(default="", repr=False)  # BINLAKE_SOURCE_PASSWORD, BINLAKE_GOLD_…
    password_file: str = ""
    defaults_file: str = ""  # MySQL option file, [client] section (else ~/.my.cnf)

    def tls(self, *, setting: str) -> Tls:
        """The ``ssl_*`` settings as :class:`Tls`; ConfigError names ``setting``.``key``."""
        return Tls.of({k: getattr(self, k) for k in _TLS_KEYS}, setting=setting)


DEFAULT_DATABASE = "binlake"  # gold's database when its DSN names none


def database_of(dsn: Dsn) -> str:
    """The gold database: the DSN's, else :data:`DEFAULT_DATABASE`."""
    return dsn.database or DEFAULT_DATABASE


def read_option_file(path: str, *, setting: str) -> dict[str, str]:
    """The ``[client]`` keys of a MySQL option file (``my.cnf`` syntax; quotes stripped).

    Raises :class:`ConfigError` naming ``setting`` and the file when it cannot be read.
    """
    parser = configparser.ConfigParser(allow_no_value=True, strict=False, interpolation=None,
                                       comment_prefixes=("#", ";"), inline_comment_prefixes=None)
    try:
        with open(path, encoding="utf-8") as fh:
            text = "\n".join(ln for ln in fh.read().splitlines()
                             if not ln.lstrip().startswith("!"))  # !include: not followed
        parser.read_string(text, source=path)
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"{setting} {path}: cannot read the option file "
                          f"({type(exc).__name__})") from None
    if not parser.has_section("client"):
        return {}
    out = {}
    for key, value in parser.items("client"):
        value = (value or "").strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.replace("-", "_")] = value
    return out


def _password_file(path: str, setting: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{setting} {path}: cannot read ({type(exc).__name__})") from None
    return first.rstrip("\r\n")


def resolve_dsn(url: str, settings: ServerSettings | None, *, setting: str, section: str,
                env: Mapping[str, str] | None = None) -> Dsn:
    """Parse ``url`` and complete it from ``settings`` (the ``[section]`` config keys).

    TLS: the DSN's ``?ssl_*`` parameters win over the section's ``ssl_*`` keys. Password and
    (when the DSN names none) user: the module docstring's order. Raises :class:`ConfigError`
    naming the setting or file at fault.
    """
    dsn = Dsn.parse(url, setting=setting)
    if settings is None:
        return dsn
    query = dict(parse_qsl(urlsplit(url).query))
    if not any(k in query for k in _TLS_KEYS):
        values = {k: getattr(settings, k, "") for k in _TLS_KEYS}
        dsn = replace(dsn, tls=Tls.of(values, setting=f"{section}."))
    if dsn.password:
        return dsn
    if settings.password:
        return replace(dsn, password=settings.password,
                       password_from=f"{section}.password / BINLAKE_{section.upper()}_PASSWORD")
    if settings.password_file:
        return replace(dsn, password=_password_file(settings.password_file,
                                                    f"{section}.password_file"),
                       password_from=f"{section}.password_file {settings.password_file}")
    env = os.environ if env is None else env
    path, what = settings.defaults_file, f"{section}.defaults_file"
    if not path:
        home = env.get("HOME") or os.path.expanduser("~")
        path, what = os.path.join(home, ".my.cnf"), "~/.my.cnf"
        if not os.path.isfile(path):
            return dsn
    client = read_option_file(path, setting=what)
    user = dsn.user if dsn.user_given else client.get("user") or dsn.user
    if "password" not in client:
        return replace(dsn, user=user)
    return replace(dsn, user=user, password=client["password"],
                   password_from=f"[client] of {what} {path}")


# -- redaction ---------------------------------------------------------------------------

def redact(text: str, *secrets: str) -> str:
    """``text`` with every secret (and its URL-quoted form) replaced by ``***``; secrets
    under 4 characters are left alone (masking them would garble every message)."""
    for secret in secrets:
        if len(secret) >= 4:
            for form in {secret, quote(secret, safe="")}:
                text = text.replace(form, "***")
    return text


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]*@")
_PASSWORD_FLAG = re.compile(r"(--?password[= ])\S+")


def redact_urls(text: str) -> str:
    """``text`` (a command line, a log line) with the password of every ``scheme://user:pw@``
    URL and of every ``--password X`` / ``--password=X`` replaced by ``***``."""
    return _PASSWORD_FLAG.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))


def error_text(exc: BaseException, dsn: Dsn) -> str:
    """A driver error's message (``(code) text``), with the password masked."""
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        text = f"({args[0]}) {args[1]}"
    else:
        text = str(args[-1] if args else exc)
    return redact(text, dsn.password)


# -- TLS ---------------------------------------------------------------------------------

def ssl_context(tls: Tls, *, section: str = "source"):
    """The ``ssl.SSLContext`` for ``tls`` (None for DISABLED / PREFERRED: the driver's own).

    Raises :class:`ConfigError` naming ``section.ssl_ca`` / ``ssl_cert`` when a file is bad.
    """
    import ssl

    if tls.mode in ("DISABLED", "PREFERRED") and not tls.cert:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.verifies:
        try:
            if tls.ca:
                ctx.load_verify_locations(cafile=tls.ca)
            else:
                ctx.load_default_certs()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{section}.ssl_ca {tls.ca}: not a readable PEM CA file "
                              f"({exc.__class__.__name__}: {exc})") from None
        # Server certificates made by older tools lack what X509_STRICT wants (as pymysql).
        ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
        ctx.check_hostname = tls.mode == "VERIFY_IDENTITY"
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert:
        try:
            ctx.load_cert_chain(tls.cert, tls.key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{section}.ssl_cert/ssl_key {tls.cert}: not a readable PEM "
                              f"certificate and key ({exc.__class__.__name__})") from None
    return ctx
