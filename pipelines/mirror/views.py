"""The mirror tables as SQL views: ``<schema>__<table>`` (current) and
``<schema>__<table>__history``, one pair per mirrored table."""

from __future__ import annotations

import logging

from pipelines.config import Config
from pipelines.lake.delta_ops import table_exists
from pipelines.mirror.job import mirror_path, mirrored_tables, view_names

__all__ = ["mirror_views", "register_mirror_views"]

log = logging.getLogger(__name__)


def mirror_views(spark, cfg: Config) -> dict[str, str]:
    """View name → Delta path of every existing mirror table."""
    out = {}
    for schema, table in mirrored_tables(spark, cfg):
        for kind, name in zip(("current", "history"), view_names(schema, table)):
            path = mirror_path(cfg, kind, schema, table)
            if table_exists(spark, path):
                out[name] = path
    return out


def register_mirror_views(spark, cfg: Config, *, global_views: bool = False) -> list[str]:
    """Create or replace a temp view (``global_views``: a global temp view, visible to every
    session of the engine as ``global_temp.<name>``) per mirror table; return the names."""
    names = []
    for name, path in mirror_views(spark, cfg).items():
        df = spark.read.format("delta").load(path)
        try:
            if global_views:
                df.createOrReplaceGlobalTempView(name)
            else:
                df.createOrReplaceTempView(name)
        except Exception as exc:  # noqa: BLE001 - a name the engine refuses: skip that view
            log.warning("mirror view %s not registered (query delta.`%s`): %s", name, path,
                        str(exc).splitlines()[0][:200])
            continue
        names.append(name)
    return names
