"""Typed configuration: a few frozen sections and one loader with a stated precedence.

Precedence, lowest to highest: built-in defaults < the TOML file (``--conf FILE``, env
``BINLAKE_CONF``, else ``conf/binlake.toml`` when present) < environment variables
``BINLAKE_<SECTION>_<KEY>`` (e.g. ``BINLAKE_LAKE_ROOT``, ``BINLAKE_ENGINE_REMOTE``; the
short forms ``BINLAKE_LAKE`` and ``BINLAKE_SPARK_REMOTE`` also work) < command-line flags.
Every bad value raises :class:`ConfigError` naming the setting.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pipelines.errors import ConfigError
from pipelines.mysql.dsn import Dsn, ServerSettings
from pipelines.vocabulary import hours_of

__all__ = [
    "LakeConfig", "EngineConfig", "SourceConfig", "BronzeConfig", "GoldConfig",
    "StreamConfig", "LeaseConfig", "StorageConfig", "Config", "load_config", "read_toml",
    "parse_retain", "DEFAULT_CONF", "ROW_GROUP_ROWS", "ARROW_BATCH_ROWS", "is_url_root",
    "resolve_root", "table_dir", "lake_dir", "parse_catalog", "LEASES_DIR", "DAMAGED_DIR",
    "STREAM_STATUS_DIR", "QUALITY_REPORTS_DIR",
]

DEFAULT_CONF = Path("conf/binlake.toml")
# rows per Parquet row group binlake's tasks write (``lake.row_group_rows``' default)
ROW_GROUP_ROWS = 20_000
# rows per Arrow batch a decoding or copying task holds: its memory bound (``bronze.batch_rows``'
# default; a data snapshot's rows fetched per batch)
ARROW_BATCH_ROWS = 20_000


# -- where the lake is (``lake.root``, ``lake.catalog``) --------------------------------------

_URL_ROOT = re.compile(r"^[a-z][a-z0-9+.-]*://")


def is_url_root(root: str) -> bool:
    """True for an object-store lake root (``s3://bucket/prefix``), not for a path or file://."""
    return bool(_URL_ROOT.match(root)) and not root.startswith("file://")


def resolve_root(root: str) -> str:
    """A path made absolute; an object-store URL kept as it is (without a trailing ``/``)."""
    return root.rstrip("/") if is_url_root(root) else os.path.abspath(root)


def table_dir(root: str, layer: str, name: str) -> str:
    """``<root>/<layer>/<name>``: where a table's files are in path mode (and by default in
    catalog mode). Works for names not registered, so new code can start with a path."""
    return lake_dir(root, layer, name)


# Places under the lake root that are not registered tables (those: pipelines/lake/tables.py).
LEASES_DIR = "_binlake/leases"  # a directory per stage (lake/lease.py, lake/lease_s3.py)
DAMAGED_DIR = "_binlake/damaged"  # what `binlake repair` set aside, per run
STREAM_STATUS_DIR = "bronze/stream_status"  # the stream's live status, a file per source
QUALITY_REPORTS_DIR = "quality"  # report.html, and reports/<run_id>.html


def lake_dir(root: str, *parts: str) -> str:
    """``<root>/<parts…>``: a place under the lake root (a table's, or one of the above)."""
    return os.path.join(resolve_root(root), *parts)


_PART = r"(?:[A-Za-z0-9_][A-Za-z0-9_-]*|`[^`]+`)"
_CATALOG = re.compile(rf"^{_PART}(?:\.{_PART})?$")


def parse_catalog(value: str, *, setting: str = "lake.catalog") -> tuple[str, ...]:
    """``cat.schema`` (or ``schema``) → its parts; :class:`ConfigError` naming ``setting``."""
    text = (value or "").strip()
    if not _CATALOG.match(text):
        raise ConfigError(f"{setting}: expected catalog.schema (e.g. main.binlake or "
                          f"spark_catalog.binlake), got {value!r}")
    return tuple(p.strip("`") for p in re.findall(_PART, text))


@dataclass(frozen=True)
class LakeConfig:
    """Where the lake's tables are (``pipelines/lake/tables.py``, docs/lake.md)."""

    root: str = "./lake"
    catalog: str = ""  # catalog.schema: metastore tables there (external, at the root's paths)
    managed: bool = False  # with catalog: managed tables (the catalog's storage), not external
    # Who writes bronze's and silver's data files: "auto" = binlake's own tasks on the embedded
    # engine at a local path (row groups, bloom filters: pipelines/lake/task_files.py), else the
    # engine; "engine" = always the engine's Delta writer
    writer: str = "auto"  # auto | engine
    # Rows per Parquet row group where binlake writes the files (and `binlake optimize`'s
    # default): the unit that statistics and bloom filters skip; 20k rows of silver are
    # about 3 MB (docs/layout.md)
    row_group_rows: int = ROW_GROUP_ROWS


@dataclass(frozen=True)
class EngineConfig:
    """Which Spark engine the session factory makes (an active session always wins)."""

    kind: str = "sail"  # sail | spark | connect
    remote: str = ""  # sc://host:port for Spark Connect
    delta_jars: str = ""  # local Delta jars for kind=spark where Maven is unreachable
    master: str = "local[*]"


@dataclass(frozen=True)
class SourceConfig(ServerSettings):
    """The source server; its TLS and credentials are :class:`ServerSettings`' keys."""

    name: str = "default"  # source_id written to every row
    dsn: str = ""
    server_uuid: str = ""
    # schemas bronze leaves out (comma-separated); gold's database is left out by itself when
    # gold.dsn names the source's server (bronze/excluded.py)
    exclude_schemas: str = ""


@dataclass(frozen=True)
class BronzeConfig:
    batch_rows: int = ARROW_BATCH_ROWS  # rows per Arrow batch: a decoding task's memory bound
    decode_in_subprocess: bool = True  # use a worker process per file (one GIL is not enough)
    # A run decoding less than this many MB of binlog decodes in the task's own process:
    # starting a worker would cost more than the decoding (docs/bronze.md)
    inline_max_mb: float = 4.0
    checksum: str = "raise"  # raise | warn | ignore
    # decoding tasks at once; 0 = the engine's cores (a cluster's: session.engine_cores)
    parallelism: int = 0
    # A file is split among idle cores in chunks of at least this: a 4 MB file decodes on two
    # cores (20 MB binlog: bronze + silver 0.83 s at 2, 1.18 s at 16; docs/bronze.md)
    min_chunk_mb: int = 2
    target_file_mb: int = 128  # bronze data files roll over at about this size
    # Keep the ROWS_QUERY/ANNOTATE_ROWS statement on every row change (dbtrail's query_text):
    # a statement of N rows is stored N times, so it is off unless asked for (docs/gold.md).
    statement_text: bool = False
    # Binlog MB per bronze commit; 0 = one commit per run; unset (None): by the engine
    # (``delta_ops.commit_bytes``: 64 where the engine's writer holds a commit's rows until
    # it ends, as Sail's does with lake.writer = "engine"; else one commit per run)
    commit_mb: float | None = None
    # Binlog MB of a run from which rows are decoded by the compiled loop (docs/bronze.md;
    # loading it costs a process ~0.6 s): 0 = every run
    compiled_min_mb: float = 48.0


@dataclass(frozen=True)
class SilverConfig:
    render_workers: int = 0  # rendering processes per task; 0 = this machine's cores
    render_in_subprocess: bool = False  # true: render in worker processes (docs/performance.md)
    target_file_mb: int = 128  # silver data files roll over at about this size
    # Binlog MB whose row changes go in one silver commit; 0 = one commit per run; unset
    # (None): by the engine, as bronze's. At least bronze.commit_mb: a slice's tasks are the
    # bronze files it reads (docs/performance.md)
    commit_mb: float | None = None
    change_data_feed: bool = False  # delta.enableChangeDataFeed on silver (engines that have CDF)
    # Binlog MB of a run from which full row images are rendered by compiled loops (loading
    # them costs the engine's process ~1 s, on a thread of its own: docs/performance.md);
    # 0 = every run. A process holding them already uses them for any run.
    compiled_min_mb: float = 160.0
    # ... or from this many row changes, whatever their bytes: narrow rows render more rows
    # per MB, and the rows are what the compiled loops save on (docs/performance.md);
    # 0 = every run.
    compiled_min_rows: int = 300_000


@dataclass(frozen=True)
class GoldConfig(ServerSettings):
    """The MySQL/MariaDB ``binlog_events`` export (``docs/gold.md``); TLS and credentials as
    in [source] (:class:`ServerSettings`)."""

    dsn: str = ""  # mysql://user:password@host:port/db; db defaults to `binlake`, created if missing
    partitions: int = 48  # hourly partitions `binlake init` creates (the current hour onwards)
    partitions_ahead: int = 6  # hourly partitions kept ahead of the current hour (export, rotate)
    batch_rows: int = 5000  # rows per INSERT statement / LOAD DATA chunk (one transaction each)
    method: str = "auto"  # auto | bulk | load_data | insert (docs/gold.md: what auto picks)
    parallelism: int = 0  # export tasks; 0 = the engine's cores
    retain: str = "7d"  # `binlake rotate` default retention: Nd or Nh
    log_retention: str = "interval 30 days"  # delta.logRetentionDuration of the lake's tables
    deleted_file_retention: str = "interval 7 days"  # delta.deletedFileRetentionDuration


@dataclass(frozen=True)
class StreamConfig:
    """``binlake stream`` (``docs/stream.md``): micro-batches, following, liveness."""

    batch_rows: int = 50000  # commit at the first transaction boundary after this many rows
    batch_interval_ms: int = 1000  # ... or once the open micro-batch is this old
    silver_lag_seconds: int = 30  # 0: silver (mirror, gold) never follow; else freshness rules
    freshness_seconds: float = 5.0  # a bronze commit is in silver/mirror/gold within this long
    stop_seconds: int = 60  # on SIGTERM/Ctrl-C, their catch-up gets at most this long
    log_interval: int = 10  # off a terminal, a progress line this often (seconds); 0 = never
    heartbeat_seconds: int = 1  # the server sends a heartbeat after this long without events
    read_timeout_seconds: int = 30  # no packet (not even a heartbeat) this long: reconnect
    reconnect_max_seconds: int = 60  # reconnect backoff doubles from 1 s up to this
    reconnect_attempts: int = 0  # failed reconnects in a row before giving up; 0 = never give up


@dataclass(frozen=True)
class LeaseConfig:
    """One writer per lake stage (``docs/concurrency.md``)."""

    wait_seconds: int = 60  # a second writer waits this long for the holder, then exits 75
    expiry_seconds: int = 30  # a holder that stops renewing (kill -9 elsewhere) frees it after this


@dataclass(frozen=True)
class StorageConfig:
    """Object-store access for an ``s3://`` lake root (``pipelines/lake/s3_client.py``,
    docs/concurrency.md); an empty key falls back to the usual ``AWS_*`` variable."""

    endpoint: str = ""  # http(s)://host:port of MinIO, R2 …; empty: AWS (AWS_ENDPOINT_URL)
    region: str = ""  # empty: AWS_REGION, else us-east-1
    access_key_id: str = ""  # empty: AWS_ACCESS_KEY_ID
    secret_access_key: str = field(default="", repr=False)  # empty: AWS_SECRET_ACCESS_KEY
    session_token: str = field(default="", repr=False)  # empty: AWS_SESSION_TOKEN


@dataclass(frozen=True)
class Config:
    lake: LakeConfig = LakeConfig()
    engine: EngineConfig = EngineConfig()
    source: SourceConfig = SourceConfig()
    bronze: BronzeConfig = BronzeConfig()
    silver: SilverConfig = SilverConfig()
    gold: GoldConfig = GoldConfig()
    stream: StreamConfig = StreamConfig()
    lease: LeaseConfig = LeaseConfig()
    storage: StorageConfig = StorageConfig()

    @property
    def lake_root(self) -> str:
        """The root as an absolute path, or the URL itself for an object store (``s3://``)."""
        return resolve_root(self.lake.root)

    def table_path(self, layer: str, name: str) -> str:
        """``<lake root>/<layer>/<name>`` (the registry's path; see ``pipelines.lake.tables.Lake``
        for reading and writing a table whether it is a path or a catalog table)."""
        return table_dir(self.lake_root, layer, name)


_SECTIONS_CLS: dict[str, type] = {"lake": LakeConfig, "engine": EngineConfig,
                                   "source": SourceConfig, "bronze": BronzeConfig,
                                   "gold": GoldConfig, "stream": StreamConfig,
                                   "lease": LeaseConfig, "silver": SilverConfig,
                                   "storage": StorageConfig}
_SECTIONS = _SECTIONS_CLS
_ALIASES = {"BINLAKE_LAKE": ("lake", "root"), "BINLAKE_SPARK_REMOTE": ("engine", "remote"),
            "BINLAKE_ENGINE": ("engine", "kind")}


# A setting declared ``float | None = None`` is decided at run time unless given: a number, or
# "auto" for None (bronze.commit_mb, silver.commit_mb).
_OPTIONAL = {"float | None": 0.0, "int | None": 0}


def _coerce(section: str, key: str, value: Any, default: Any, declared: Any = None) -> Any:
    name = f"{section}.{key}"
    if default is None and str(declared) in _OPTIONAL:
        if value is None or str(value).strip().lower() == "auto":
            return None
        default = _OPTIONAL[str(declared)]  # coerced as the type declared otherwise
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true/false, got {value!r}")
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if isinstance(default, int):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # a TOML list for a comma-separated setting
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected a string, got {value!r}")
    return value


def _merge(values: dict[str, dict[str, Any]], section: str, key: str, value: Any) -> None:
    fields = {f.name: f for f in dataclasses.fields(_SECTIONS_CLS[section])}
    if key not in fields:
        raise ConfigError(f"unknown setting {section}.{key}")
    f = fields[key]
    values.setdefault(section, {})[key] = _coerce(section, key, value, f.default, f.type)


def read_toml(path: str | os.PathLike, *, what: str) -> dict[str, Any]:
    """Parse a TOML file; :class:`ConfigError` names ``what`` and the file when it cannot."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path}: invalid TOML: {exc}") from exc


def load_config(conf_file: str | None = None, *, env: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> Config:
    """Build the :class:`Config` from defaults, the TOML file, ``BINLAKE_*`` env and overrides.

    ``overrides`` maps ``"section.key"`` to a value (command-line flags; ``None`` = not given).
    """
    env = os.environ if env is None else env
    values: dict[str, dict[str, Any]] = {}
    path = conf_file or env.get("BINLAKE_CONF")
    if path is None and DEFAULT_CONF.exists():
        path = str(DEFAULT_CONF)
    if path:
        data = read_toml(path, what="--conf")
        for section, body in data.items():
            if section not in _SECTIONS or not isinstance(body, dict):
                raise ConfigError(f"{path}: unknown section [{section}]")
            for key, value in body.items():
                _merge(values, section, key, value)
    for var, value in env.items():
        if not var.startswith("BINLAKE_") or var == "BINLAKE_CONF":
            continue
        if var in _ALIASES:
            _merge(values, *_ALIASES[var], value)
            continue
        rest = var[len("BINLAKE_"):].lower()
        section, _, key = rest.partition("_")
        if section in _SECTIONS and key:
            _merge(values, section, key, value)
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        if section not in _SECTIONS:
            raise ConfigError(f"unknown setting {dotted}")
        _merge(values, section, key, value)
    cfg = Config(**{s: _SECTIONS_CLS[s](**values.get(s, {})) for s in _SECTIONS})
    _validate(cfg)
    return cfg


def _validate(cfg: Config) -> None:
    if cfg.engine.kind not in ("sail", "spark", "connect"):
        raise ConfigError(f"engine.kind: expected sail, spark or connect, got {cfg.engine.kind!r}")
    if cfg.engine.kind == "connect" and not cfg.engine.remote:
        raise ConfigError("engine.kind: connect needs engine.remote (--spark-remote sc://HOST:PORT)")
    if cfg.engine.remote and not cfg.engine.remote.startswith("sc://"):
        raise ConfigError(f"engine.remote: expected sc://host:port, got {cfg.engine.remote!r}")
    if cfg.lake.catalog:
        parse_catalog(cfg.lake.catalog)
    elif cfg.lake.managed:
        raise ConfigError("lake.managed: managed tables need lake.catalog (catalog.schema)")
    if cfg.lake.writer not in ("auto", "engine"):
        raise ConfigError(f"lake.writer: expected auto or engine, got {cfg.lake.writer!r}")
    if cfg.lake.row_group_rows < 1:
        raise ConfigError("lake.row_group_rows: must be at least 1")
    if cfg.bronze.checksum not in ("raise", "warn", "ignore"):
        raise ConfigError(f"bronze.checksum: expected raise, warn or ignore, got {cfg.bronze.checksum!r}")
    if cfg.bronze.batch_rows < 1:
        raise ConfigError("bronze.batch_rows: must be at least 1")
    for section in ("bronze", "silver"):
        commit_mb = getattr(cfg, section).commit_mb
        if commit_mb is not None and commit_mb < 0:
            raise ConfigError(f"{section}.commit_mb: must be 0 (one commit per run), more, or "
                              "\"auto\" (by the engine)")
        if getattr(cfg, section).target_file_mb < 0:
            raise ConfigError(f"{section}.target_file_mb: must be 0 (no limit) or more")
        if getattr(cfg, section).compiled_min_mb < 0:
            raise ConfigError(f"{section}.compiled_min_mb: must be 0 (every run) or more")
    if cfg.silver.compiled_min_rows < 0:
        raise ConfigError("silver.compiled_min_rows: must be 0 (every run) or more")
    if cfg.silver.render_workers < 0:
        raise ConfigError("silver.render_workers: must be 0 (this machine's cores) or more")
    _validate_gold(cfg.gold)
    _validate_stream(cfg.stream)
    if cfg.lease.wait_seconds < 0:
        raise ConfigError("lease.wait_seconds: must be 0 or more")
    if cfg.lease.expiry_seconds < 3:
        raise ConfigError("lease.expiry_seconds: must be at least 3")
    for name, section in (("source", cfg.source), ("gold", cfg.gold)):
        if section.dsn:
            Dsn.parse(section.dsn, setting=f"{name}.dsn")
        section.tls(setting=f"{name}.")


_INTERVAL = re.compile(r"^interval\s+\d+\s+(?:second|minute|hour|day|week)s?$", re.I)


def parse_retain(value: str, *, setting: str = "gold.retain") -> int:
    """``7d`` / ``48h`` → hours; raises :class:`ConfigError` naming ``setting``."""
    hours = hours_of(value)
    if hours is None:
        raise ConfigError(f"{setting}: expected Nd or Nh (e.g. 7d, 48h), got {value!r}")
    return hours


def _validate_gold(g: GoldConfig) -> None:
    if g.method not in ("auto", "bulk", "load_data", "insert"):
        raise ConfigError(f"gold.method: expected auto, bulk, load_data or insert, "
                          f"got {g.method!r}")
    for name in ("partitions", "batch_rows"):
        if getattr(g, name) < 1:
            raise ConfigError(f"gold.{name}: must be at least 1")
    for name in ("partitions_ahead", "parallelism"):
        if getattr(g, name) < 0:
            raise ConfigError(f"gold.{name}: must be 0 or more")
    parse_retain(g.retain)
    for name in ("log_retention", "deleted_file_retention"):
        if not _INTERVAL.match(getattr(g, name).strip()):
            raise ConfigError(f"gold.{name}: expected a Delta interval like 'interval 30 days', "
                              f"got {getattr(g, name)!r}")


def _validate_stream(s: StreamConfig) -> None:
    for name in ("batch_rows", "batch_interval_ms", "heartbeat_seconds", "read_timeout_seconds",
                 "reconnect_max_seconds"):
        if getattr(s, name) < 1:
            raise ConfigError(f"stream.{name}: must be at least 1")
    for name in ("silver_lag_seconds", "reconnect_attempts", "stop_seconds", "log_interval"):
        if getattr(s, name) < 0:
            raise ConfigError(f"stream.{name}: must be 0 or more")
    if s.freshness_seconds <= 0:
        raise ConfigError("stream.freshness_seconds: must be more than 0 (silver_lag_seconds "
                          "= 0 stops silver following)")
    if s.read_timeout_seconds < 2 * s.heartbeat_seconds:
        raise ConfigError("stream.read_timeout_seconds: must be at least twice "
                          "stream.heartbeat_seconds (heartbeats keep an idle stream alive)")
