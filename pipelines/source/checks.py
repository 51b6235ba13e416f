"""The source checks: what a server's settings and schema mean for what binlake can read.

``binlog_format`` must be ROW (refuse otherwise: statements carry no row images) and
``log_bin`` ON (refuse); ``binlog_row_image`` FULL (warn otherwise: absent columns);
``binlog_row_value_options`` PARTIAL_JSON warns (JSON updates logged as diffs);
``binlog_row_metadata`` is reported (MINIMAL/absent: column names come only from snapshots);
foreign keys with CASCADE / SET NULL / SET DEFAULT rules warn (see :func:`fk_cascade_check`);
tables without a PRIMARY KEY warn (pk_values is formed from all columns, ``pk_kind =
'all_columns'``, see ``model``).
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from pipelines.source.model import Snapshot, SourceCheck

__all__ = ["server_checks", "schema_checks", "fk_cascade_check", "cascades_are_logged",
           "refusals"]

_DETAIL_ITEMS = 20  # items a check names before "and N more"

def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_DETAIL_ITEMS])
    more = len(items) - _DETAIL_ITEMS
    return shown + (f" and {more} more" if more > 0 else "")


def server_checks(variables: dict[str, str]) -> list[SourceCheck]:
    """Verdicts on the binlog settings (``SHOW GLOBAL VARIABLES``, names lower-case)."""
    v = {k.lower(): (val or "").upper() for k, val in variables.items()}
    out = []
    if v.get("log_bin") in ("ON", "1"):
        out.append(SourceCheck("ok", "log_bin", "binary log is on"))
    else:
        out.append(SourceCheck("refuse", "log_bin", f"binary log is off (log_bin={v.get('log_bin')}):"
                                                   " there are no binlogs to index"))
    fmt = v.get("binlog_format")
    if fmt == "ROW":
        out.append(SourceCheck("ok", "binlog_format", "ROW"))
    else:
        out.append(SourceCheck("refuse", "binlog_format",
                               f"binlog_format={fmt}: row changes are logged as statements, "
                               "without row images; set binlog_format=ROW"))
    image = v.get("binlog_row_image")
    if image == "FULL":
        out.append(SourceCheck("ok", "binlog_row_image", "FULL"))
    else:
        out.append(SourceCheck("warn", "binlog_row_image",
                               f"binlog_row_image={image}: row images leave out columns "
                               "(MINIMAL: unchanged and non-key columns; NOBLOB: unchanged "
                               "BLOB/TEXT), which silver shows as absent, not as values"))
    if "binlog_row_value_options" in v:
        opts = v["binlog_row_value_options"]
        if "PARTIAL_JSON" in opts:
            out.append(SourceCheck("warn", "binlog_row_value_options",
                                   "PARTIAL_JSON: JSON updates may be logged as partial diffs "
                                   "that binlake does not apply; after images of JSON columns "
                                   "can be incomplete"))
        else:
            out.append(SourceCheck("ok", "binlog_row_value_options", opts or "(empty)"))
    meta = v.get("binlog_row_metadata")
    if meta == "FULL":
        out.append(SourceCheck("ok", "binlog_row_metadata",
                               "FULL: TABLE_MAP events carry column names"))
    else:
        shown = meta if meta else "not available on this server"
        out.append(SourceCheck("warn", "binlog_row_metadata",
                               f"{shown}: column names come from snapshots only; take a "
                               "snapshot before and after every DDL"))
    return out


def cascades_are_logged(version: str | None, variables: dict[str, str] | None = None) -> bool:
    """Whether child-row changes made by FK cascades are written to the binlog.

    MariaDB (every version) and MySQL up to 9.5: no — InnoDB performs them inside the
    storage engine, below the binlog, so only the parent's row change is logged. MySQL 9.6+
    enforces foreign keys in the SQL layer and logs cascaded child changes as row events
    (before the parent's), unless ``innodb_native_foreign_keys=ON`` restores the old way.
    """
    text = version or ""
    if "mariadb" in text.lower():
        return False
    m = re.match(r"(\d+)\.(\d+)", text)
    if not m or (int(m.group(1)), int(m.group(2))) < (9, 6):
        return False
    native = (variables or {}).get("innodb_native_foreign_keys", "OFF").upper()
    return native not in ("ON", "1")


def fk_cascade_check(snapshot: Snapshot, variables: dict[str, str] | None = None) -> SourceCheck:
    """Warn about FKs whose ON DELETE/UPDATE CASCADE / SET NULL / SET DEFAULT change children."""
    seen: dict[tuple[str, str], str] = {}
    for f in snapshot.fks:
        if f.cascades:
            rules = [f"ON DELETE {f.delete_rule}" if f.delete_rule != "RESTRICT" and
                     f.delete_rule != "NO ACTION" else "",
                     f"ON UPDATE {f.update_rule}" if f.update_rule != "RESTRICT" and
                     f.update_rule != "NO ACTION" else ""]
            seen[(f.constraint_schema, f.constraint_name)] = (
                f"{f.table_schema}.{f.table_name}.{f.constraint_name} "
                f"({' '.join(r for r in rules if r)})")
    if not seen:
        return SourceCheck("ok", "fk_cascade", "no foreign key changes child rows by itself")
    items = _listed([seen[k] for k in sorted(seen)])
    if cascades_are_logged(snapshot.server_version, variables):
        return SourceCheck("ok", "fk_cascade",
                           f"cascaded child changes are logged as row events on this server: "
                           f"{items}")
    version = snapshot.server_version or "this server"
    return SourceCheck("warn", "fk_cascade",
                       f"CASCADED CHILD CHANGES ARE NOT IN THE BINLOG: on {version} InnoDB "
                       "changes the child rows itself and logs only the parent's row change "
                       "(only MySQL 9.6+ with innodb_native_foreign_keys=OFF logs them), so "
                       "silver never sees these child deletes/updates: " + items)


def schema_checks(snapshot: Snapshot, variables: dict[str, str] | None = None) -> list[SourceCheck]:
    """Verdicts that follow from the schema alone (FK cascades, tables without PK)."""
    out = [fk_cascade_check(snapshot, variables)]
    no_pk = [f"{s}.{t}" for (s, t), tab in sorted(snapshot.tables.items())
             if not tab.has_primary_key]
    if no_pk:
        out.append(SourceCheck("warn", "primary_key",
                               "tables without a PRIMARY KEY (pk_values is every column's value "
                               "in ordinal order, pk_kind=all_columns; identical rows share a "
                               f"pk_hash): {_listed(no_pk)}"))
    else:
        out.append(SourceCheck("ok", "primary_key", "every table has a PRIMARY KEY"))
    return out


# -- the snapshot ----------------------------------------------------------------------------


def refusals(checks: Iterable[SourceCheck]) -> list[SourceCheck]:
    return [c for c in checks if c.level == "refuse"]
