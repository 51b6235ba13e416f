"""Make the shipped sample binlogs: ``python scripts/make_sample_binlog.py OUTDIR``.

Starts a throwaway MariaDB (:class:`devtools.mariadb.MariaDBServer`), runs
:func:`devtools.mixed_workload.run_mixed_workload`, rotates the log, reads every workload table
back with ``SELECT`` (the ground truth for replay tests), shuts the server down cleanly (so
no file is left flagged in use) and writes to OUTDIR:

* the binlog files (``mariadb-bin.000001`` …, not the index);
* ``expected_tables.json``: per table its columns, declared types (``COLUMN_TYPE``), character
  sets (null for non-text columns), primary key and final rows ordered by primary key, each value as the server's text protocol returns
  it (a string, ``null``, or ``{"hex": "…"}`` for binary-charset values: BLOB, BINARY, BIT,
  GEOMETRY);
* ``README.md``: what made them (server version, options, date, workload counts).

Existing ``mariadb-bin.*`` files in OUTDIR are replaced.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from devtools.mariadb import BINLOG_BASENAME, MariaDBServer  # noqa: E402
from devtools.mixed_workload import (  # noqa: E402
    ORDER_BY, WORKLOAD_TABLES, WorkloadSummary, run_mixed_workload,
)

SERVER_OPTIONS: dict[str, Any] = {
    "binlog_row_metadata": "FULL",
    "server_id": 1,
    "binlog_checksum": "CRC32",
}


def _json_value(value: object) -> object:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"hex": bytes(value).hex()}
    raise TypeError(f"unexpected value from a conv={{}} connection: {value!r}")


def read_tables(server: MariaDBServer) -> dict[str, Any]:
    """Every workload table's final contents as the server returns them (no conversion)."""
    conn = server.connect(conv={})  # no decoders: text stays text, binary stays bytes
    tables: dict[str, Any] = {}
    try:
        with conn.cursor() as cur:
            for name in WORKLOAD_TABLES:
                schema, table = name.split(".")
                cur.execute(
                    "SELECT COLUMN_NAME, COLUMN_TYPE, CHARACTER_SET_NAME "
                    "FROM information_schema.COLUMNS "
                    f"WHERE TABLE_SCHEMA = '{schema}' AND TABLE_NAME = '{table}' "
                    "ORDER BY ORDINAL_POSITION")
                cols = [(str(c), str(t), None if cs is None else str(cs))
                        for c, t, cs in cur.fetchall()]
                cur.execute(
                    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
                    f"WHERE TABLE_SCHEMA = '{schema}' AND TABLE_NAME = '{table}' "
                    "AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION")
                pk = [str(r[0]) for r in cur.fetchall()]
                cur.execute(f"SELECT * FROM {name} ORDER BY {ORDER_BY[name]}")
                rows = [[_json_value(v) for v in row] for row in cur.fetchall()]
                tables[name] = {
                    "columns": [c for c, _t, _cs in cols],
                    "column_types": [t for _c, t, _cs in cols],
                    "charsets": [cs for _c, _t, cs in cols],
                    "primary_key": pk,
                    "rows": rows,
                }
    finally:
        conn.close()
    return tables


def _dump_expected(version: str, tables: dict[str, Any]) -> str:
    """JSON with one line per row (diff-friendly), same data as ``json.dumps``."""
    def one(v: object) -> str:
        return json.dumps(v, ensure_ascii=False)

    out = ["{", f' "server_version": {one(version)},', ' "tables": {']
    for i, (name, t) in enumerate(tables.items()):
        out.append(f"  {one(name)}: {{")
        for key in ("columns", "column_types", "charsets", "primary_key"):
            out.append(f"   {one(key)}: {one(t[key])},")
        rows = ",\n".join(f"    {one(r)}" for r in t["rows"])
        out.append('   "rows": [' + ("\n" + rows + "\n   ]" if rows else "]"))
        out.append("  }" + ("," if i < len(tables) - 1 else ""))
    out += [" }", "}", ""]
    return "\n".join(out)


def _readme(version: str, summary: WorkloadSummary, files: Sequence[Path],
            expected: dict[str, Any]) -> str:
    today = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    lines = [
        "# Sample binlogs",
        "",
        f"Made by `scripts/make_sample_binlog.py` (`make sample`) on {today} with MariaDB "
        f"`{version}`, running `devtools.mixed_workload.run_mixed_workload(seed=1)`.",
        "",
        "Server options: `binlog_format=ROW`, `binlog_row_image=FULL`, "
        f"`binlog_row_metadata={SERVER_OPTIONS['binlog_row_metadata']}`, "
        f"`binlog_checksum={SERVER_OPTIONS['binlog_checksum']}`, "
        f"`server_id={SERVER_OPTIONS['server_id']}`, `default_time_zone=+00:00`, "
        "`character_set_server=utf8mb4`; the session used `sql_mode=''` (zero dates allowed).",
        "",
        f"Workload: {summary.statements} statements, {summary.flushes} `FLUSH BINARY LOGS`, "
        f"{summary.total_row_changes} row changes "
        f"({', '.join(f'{k} {v}' for k, v in sorted(summary.changes_by_type().items()))}).",
        "",
        "| table | inserted | updated | deleted | final rows |",
        "|---|---|---|---|---|",
    ]
    for table in summary.tables:
        counts = [summary.row_changes.get((table, k), 0) for k in ("INSERT", "UPDATE", "DELETE")]
        lines.append(f"| `{table}` | {counts[0]} | {counts[1]} | {counts[2]} | "
                     f"{len(expected[table]['rows'])} |")
    lines += ["", "| file | bytes | sha256 |", "|---|---|---|"]
    for f in files:
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        lines.append(f"| `{f.name}` | {f.stat().st_size} | `{digest[:16]}…` |")
    lines += [
        "",
        "`expected_tables.json` holds every workload table's final contents, read with "
        "`SELECT * … ORDER BY <primary key>` over the text protocol without conversion: values "
        "are the server's text, `null`, or `{\"hex\": …}` for binary-charset values (BLOB, "
        "BINARY/VARBINARY, BIT, GEOMETRY). Note the text protocol pads BINARY(n) with 0x00 and "
        "strips CHAR trailing spaces, converts latin1 text to UTF-8, and shows ENUM/SET by "
        "label, YEAR as `0000`…: replay tests compare per type.",
        "",
    ]
    return "\n".join(lines)


def make_samples(outdir: Path) -> list[Path]:
    """Run the workload on a fresh server and write the samples; return the binlog copies."""
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="binlake-sample-") as tmp:
        server = MariaDBServer(workdir=Path(tmp) / "server", **SERVER_OPTIONS)
        try:
            server.start()
            conn = server.connect()
            try:
                summary = run_mixed_workload(conn, seed=1)
            finally:
                conn.close()
            server.flush_logs()
            version = server.version()
            expected = read_tables(server)
            sources = server.binlog_files()
        finally:
            server.stop()  # clean shutdown: the last file is closed, not left "in use"
        for old in outdir.glob(f"{BINLOG_BASENAME}.*"):
            old.unlink()
        copies = []
        for src in sources:
            dst = outdir / src.name
            shutil.copyfile(src, dst)
            copies.append(dst)
    (outdir / "expected_tables.json").write_text(_dump_expected(version, expected),
                                                  encoding="utf-8")
    (outdir / "README.md").write_text(_readme(version, summary, copies, expected),
                                      encoding="utf-8")
    return copies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="directory for the binlogs and README.md")
    args = parser.parse_args(argv)
    copies = make_samples(args.outdir)
    total = sum(p.stat().st_size for p in copies)
    print(f"wrote {len(copies)} binlog files ({total} bytes) to {args.outdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
