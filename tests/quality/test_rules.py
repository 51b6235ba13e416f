"""Quality rules on a real lake (embedded engine, real Delta): deliberate defects, each rule's
counts and the exit code; the real pipeline over the shipped samples passes every rule."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import pytest

from pipelines.config import load_config
from pipelines.errors import ConfigError
from pipelines.quality import (
    Window, exit_code, last_quality, load_rules, parse_rules, render_last, render_result,
    result_to_json, run_quality, summary_line,
)
from pipelines.quality import checks, unique_passes
from pipelines.quality import job as quality_job
from pipelines.quality.datasets import (SilverSlice, alone_in_bounds, bound_aggregates,
                                        context_frame, context_key_counts, keyed_rows,
                                        silver_slice)
from pipelines.quality.rules import Action, Expect, Rule
from pipelines.quality.report import render_report
from pipelines.silver.snapshot_store import SNAPSHOTS_DDL
from pipelines.silver.transform import QUARANTINE_DDL, SILVER_COLUMNS

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
SILVER_DDL = (
    "source_id string, server_id bigint, server_uuid string, binlog_file string, "
    "start_pos bigint, end_pos bigint, row_in_event int, seq bigint, event_timestamp timestamp, "
    "event_date date, gtid string, connection_id bigint, schema_name string, table_name string, "
    "event_type string, pk_values string, pk_hash string, pk_kind string, "
    "changed_columns string, row_before string, row_after string, absent_columns string, "
    "schema_version string, query_text string, commit_ts_us bigint, origin string, "
    "pk_values_after string, pk_hash_after string"
)
assert [c.split()[0] for c in SILVER_DDL.split(", ")] == SILVER_COLUMNS
FILE = "mariadb-bin.000001"
OLD = dt.datetime(2020, 1, 1, 12, 0, 0)
NOW = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(hours=1)


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def silver_row(pos: int, event_type: str, pk: str | None, *, row: int = 0, table: str = "t",
               before: dict | None = None, after: dict | None = None, pk_hash: str = "auto",
               absent: list | None = None, version: str = "binlog", ts: dt.datetime = NOW,
               seq: int | None = None) -> tuple:
    """A silver row (docs/silver.md columns); pk_hash and seq right unless given."""
    return ("default", 1, None, FILE, pos, pos + 50, row,
            (1 << 32 | pos + row) if seq is None else seq, ts, ts.date(), None, 7, "shop", table,
            event_type, pk, _sha(pk) if pk_hash == "auto" else pk_hash, "primary_key",
            None, json.dumps(before) if before is not None else None,
            json.dumps(after) if after is not None else None,
            json.dumps(absent) if absent is not None else None, version,
            f"INSERT /* {pos} */ INTO t" if event_type == "INSERT" else None, None, "binlog",
            None, None)


def quarantine_row(pos: int, table: str, column_count: int, reason: str) -> tuple:
    return ("default", FILE, pos, 0, NOW, "shop", table, "INSERT", column_count, reason, NOW)


def snapshot_rows(snapshot_id: str, when: dt.datetime, tables: dict[str, list[str]]) -> list:
    cols = [c.split()[0] for c in SNAPSHOTS_DDL.split(", ")]
    out = []
    for table, names in tables.items():
        for i, name in enumerate(names, 1):
            v = {"snapshot_id": snapshot_id, "snapshot_time": when, "source_id": "default",
                 "schema_name": "shop", "table_name": table, "column_name": name,
                 "ordinal_position": i}
            out.append(tuple(v.get(c) for c in cols))
    return out


T = {"id": 1, "name": "a"}
# Version 0 of silver: three good rows. Version 1: the defects (and two good rows).
V0 = [silver_row(100, "INSERT", "1", after=T, ts=OLD),
      silver_row(200, "UPDATE", "1", before=T, after={"id": 1, "name": "b"}, ts=OLD),
      silver_row(300, "DELETE", "1", before={"id": 1, "name": "b"}, ts=OLD)]
V1 = [
    silver_row(400, "INSERT", "2", after={"id": 2, "name": "x"}, pk_hash="0" * 64),  # bad hash
    silver_row(100, "INSERT", "1", after=T, ts=OLD),  # the very row 100 appended again
    silver_row(501, "INSERT", "5", after={"id": 5, "name": "x"}),  # seq of (500, 1) below
    silver_row(500, "INSERT", "6", row=1, after={"id": 6, "name": "x"}),
    silver_row(600, "INSERT", "7", before={"id": 7, "name": "x"}, after={"id": 7, "name": "x"}),
    silver_row(700, "INSERT", None, after={"id": None, "name": "x"}),  # no pk_values
    silver_row(800, "UPDATE", "8", before={"id": 8}, after={"id": 8}, absent=["name"]),
    # MINIMAL: key-only before image, changed column only after: 3 names in all, as in s1.
    silver_row(850, "UPDATE", "8", table="u", before={"id": 8}, after={"b": 3},
               absent=["a", "b", "id"], version="s1"),
    silver_row(900, "INSERT", "9" * 600, after={"id": "9" * 600, "name": "x"}),  # > 512
    silver_row(1000, "INSERT", "10", table="u", after={"id": 10, "a": 1}, version="s1"),
    silver_row(1100, "INSERT", "11", table="u", after={"id": 11, "a": 1, "b": 2},
               version="s1"),
    silver_row(1200, "UPSERT", "12", after={"id": 12, "name": "x"}),
]
QUARANTINE = [
    quarantine_row(2000, "u", 3, "column count 3 in the binlog but 4 in snapshot s0"),
    quarantine_row(2100, "v", 2, "no schema: the binlog carries no column names "
                                 "(binlog_row_metadata=MINIMAL) and no snapshot is valid for "
                                 "this table's schema epoch (before a DDL)"),
    quarantine_row(2200, "w", 2, "no schema: the binlog carries no column names "
                                 "(binlog_row_metadata=MINIMAL) and no snapshot is valid for "
                                 "this table's schema epoch"),
]
SNAPSHOTS = (snapshot_rows("s0", OLD, {"v": ["id", "x"]})
             + snapshot_rows("s1", NOW, {"t": ["id", "name"], "u": ["id", "a", "b"],
                                         "v": ["id", "x", "y"]}))


@pytest.fixture(scope="module")
def bad_lake(spark, tmp_path_factory):
    cfg = load_config(overrides={"lake.root": str(tmp_path_factory.mktemp("bad") / "lake")})
    silver = cfg.table_path("silver", "binlog_events")
    for rows in (V0, V1):
        spark.createDataFrame(rows, SILVER_DDL).write.format("delta").mode("append").save(silver)
    (spark.createDataFrame(QUARANTINE, QUARANTINE_DDL + ", quarantined_at timestamp")
     .write.format("delta").save(cfg.table_path("silver", "quarantine")))
    (spark.createDataFrame(SNAPSHOTS, SNAPSHOTS_DDL).write.format("delta")
     .save(cfg.table_path("silver", "schema_snapshots")))
    return cfg


def counts(res) -> dict[tuple[str, str], tuple[int, int, str]]:
    return {(r.name, r.dataset): (r.passed_records, r.failed_records, r.status)
            for r in res.rules}


# (rule, dataset) → (passed, failed, status) for the last-run window: the 12 rows of version
# 1 (row 100 once more); uniqueness also sees the older copy of row 100.
EXPECTED_LAST_RUN = {
    ("column_count", "silver"): (11, 1, "failed"),  # u with 2 keys, snapshot s1 has 3
    ("column_count", "quarantine"): (1, 2, "failed"),  # count reason; v: 2 vs latest 3
    ("every_event_named", "quarantine"): (0, 3, "failed"),
    ("pk_values_not_null", "silver"): (11, 1, "failed"),
    ("pk_hash_is_sha256", "silver"): (11, 1, "failed"),
    ("event_type_valid", "silver"): (11, 1, "failed"),
    ("images_match_event_type", "silver"): (10, 2, "failed"),  # INSERT with before; UPSERT
    ("seq_unique", "silver"): (9, 4, "failed"),  # 100 twice, (501, 0) ~ (500, 1)
    ("bronze_key_unique", "silver"): (11, 2, "failed"),
    ("full_images", "silver"): (10, 2, "warned"),
    ("pk_values_fit_gold", "silver"): (10, 1, "warned"),  # the NULL pk_values is not checked
}


def test_each_rule_counts_its_defects(spark, bad_lake):
    res = run_quality(spark, bad_lake)
    assert res.window == "last-run" and res.silver_version == 1
    assert res.rows_checked == {"silver": 12, "quarantine": 3}
    assert counts(res) == EXPECTED_LAST_RUN
    assert exit_code(res) == 1 and res.status == "failed"


def test_failing_keys_are_the_defective_rows(spark, bad_lake):
    res = run_quality(spark, bad_lake, write=False)

    def keys(name, dataset):
        return sorted((f["binlog_file"], f["start_pos"], f["row_in_event"])
                      for f in res.rule(name, dataset).failing)

    assert keys("pk_hash_is_sha256", "silver") == [(FILE, 400, 0)]
    assert keys("images_match_event_type", "silver") == [(FILE, 600, 0), (FILE, 1200, 0)]
    assert keys("bronze_key_unique", "silver") == [(FILE, 100, 0), (FILE, 100, 0)]
    assert keys("seq_unique", "silver") == [(FILE, 100, 0), (FILE, 100, 0), (FILE, 500, 1),
                                            (FILE, 501, 0)]
    assert keys("column_count", "silver") == [(FILE, 1000, 0)]
    assert keys("column_count", "quarantine") == [(FILE, 2000, 0), (FILE, 2100, 0)]
    assert {f["table_name"] for f in res.rule("every_event_named", "quarantine").failing} == {
        "u", "v", "w"}
    # Per table: rows checked and failing rows per rule.
    tables = {(t.dataset, t.table_name): t for t in res.tables}
    assert (tables[("silver", "t")].rows, tables[("silver", "u")].rows) == (9, 3)
    assert tables[("silver", "u")].failed == {"column_count": 1, "full_images": 1}
    assert tables[("silver", "t")].failed["images_match_event_type"] == 2
    assert tables[("quarantine", "v")].failed == {"column_count": 1, "every_event_named": 1}
    for r in res.rules:  # the per-table breakdown adds up to GE's totals
        assert sum(t.failed.get(r.name, 0) for t in res.tables
                   if t.dataset == r.dataset) == r.failed_records, r.name


def test_window_all_and_recent(spark, bad_lake):
    res = run_quality(spark, bad_lake, window="all", write=False)
    assert res.rows_checked["silver"] == 15
    c = counts(res)
    assert c[("seq_unique", "silver")] == (11, 4, "failed")
    assert c[("bronze_key_unique", "silver")] == (13, 2, "failed")
    assert c[("pk_hash_is_sha256", "silver")] == (14, 1, "failed")
    recent = run_quality(spark, bad_lake, window="24h", write=False)
    assert recent.rows_checked["silver"] == 11  # the version-1 rows except the 2020 copy
    assert recent.window == "24h"


def test_uniqueness_in_passes_finds_the_same_defects(spark, bad_lake, monkeypatch,
                                                     unique_pass_counts):
    """Passes of two rows (``quality.unique_passes``; a window of millions on the embedded
    engine): each uniqueness rule is grouped in several passes, each with the older rows
    sharing its keys, and still finds the duplicates in the window and against the older
    rows: every count as in one pass (a failing rule's counts then come from
    great-expectations over the whole context)."""
    monkeypatch.setattr(unique_passes, "PASS_ROWS", 2)
    assert counts(run_quality(spark, bad_lake, write=False)) == EXPECTED_LAST_RUN
    # 12 rows: six ranges or more each
    assert len(unique_pass_counts) == 2 and min(unique_pass_counts) >= 6
    c = counts(run_quality(spark, bad_lake, window="all", write=False))
    assert c[("seq_unique", "silver")] == (11, 4, "failed")
    assert c[("bronze_key_unique", "silver")] == (13, 2, "failed")


@pytest.mark.parametrize("columns,when", [
    (("source_id", "seq"), None),
    (("source_id", "binlog_file", "start_pos", "row_in_event"), None),
    (("pk_values",), None),  # row 700 has no pk_values: a NULL part
    (("table_name", "pk_values"), "event_type = 'INSERT'"),
])
def test_context_key_counts_are_the_context_grouped(spark, bad_lake, monkeypatch, columns,
                                                    when):
    """Per key of the last run's rows, the table's rows sharing it: counted in one aggregate
    (``context_key_counts``), and in passes, as grouping the context (a semi join) counts."""
    sl = silver_slice(spark, bad_lake, Window())
    rule = Rule("r", "silver", Expect.UNIQUE, Action.WARN, columns=columns, when=when)
    cols = list(columns)

    def rows(df):
        return sorted((tuple(r) for r in df.collect()), key=repr)

    want = rows(checks.key_counts(context_frame(sl, cols), rule))
    assert want and any(r[-1] > 1 for r in want)  # the older copy of row 100 shares keys
    assert rows(context_key_counts(sl, cols, checks.considered(rule))) == want
    monkeypatch.setattr(unique_passes, "PASS_ROWS", 2)
    (bounds,) = sl.rows.agg(*checks.unique_measures(sl.rows, rule)).collect()
    filters = checks.unique_filters(sl.rows, rule, bounds.asDict())
    assert len(filters) > 1
    assert sorted((r for w in filters for r in rows(context_key_counts(
        sl, cols, checks.considered(rule), w))), key=repr) == want


# A window of 42 rows (source "s", seq 100..139; 120 and 139 twice) after older rows.
_WINDOW = [("s", 100 + i) for i in range(40)] + [("s", 120), ("s", 139)]


@pytest.mark.parametrize("older,sourceless,alone,duplicated", [
    ([("s", 5), ("s", 500)], False, True, 4),  # the history's seq outside the window's
    ([("s", 5), ("s", 120)], False, False, 5),  # an older row sharing seq 120: 3 rows hold it
    ([("t", 130)], False, True, 4),             # another source: outside the source bounds
    ([("s", 141)], True, False, 4),             # within the bounds (seq up to 141 with the
                                                # sourceless row), sharing no key
    ([], True, True, 4),                        # a row without a source: no key, no context
])
def test_window_alone_in_its_key_bounds(spark, monkeypatch, older, sourceless, alone,
                                        duplicated) -> None:
    """``alone_in_bounds``: no older row lies within the window's key bounds, so each pass
    groups the window's rows with a whole key alone (``keyed_rows``: no union with the
    table's). Either way the passes count what grouping the context (a semi join) counts."""
    window = _WINDOW + ([(None, 141)] if sourceless else [])
    ddl = "source_id string, seq bigint"
    sl = SilverSlice(spark.createDataFrame(window, ddl), spark.createDataFrame(older + window, ddl),
                     1, Window())
    rule = Rule("r", "silver", Expect.UNIQUE, Action.WARN, columns=("source_id", "seq"))
    cols = list(rule.columns)
    bounds = sl.rows.agg(*bound_aggregates(cols)).first().asDict()
    assert alone_in_bounds(sl, cols, bounds) is alone

    def rows(df):
        return sorted((tuple(r) for r in df.collect()), key=repr)

    want = rows(checks.key_counts(context_frame(sl, cols, bounds), rule))
    assert sum(r[-1] for r in want if r[-1] > 1) == duplicated
    monkeypatch.setattr(unique_passes, "PASS_ROWS", 10)
    (measured,) = sl.rows.agg(*checks.unique_measures(sl.rows, rule)).collect()
    filters = checks.unique_filters(sl.rows, rule, measured.asDict())
    assert len(filters) >= 5
    got = [r for w in filters for r in rows(
        checks.key_counts(keyed_rows(sl, cols, w), rule) if alone
        else context_key_counts(sl, cols, checks.considered(rule), w, bounds))]
    assert sorted(got, key=repr) == want


@pytest.mark.parametrize("alone", [False, True])
def test_a_commit_landing_mid_run_is_checked_at_its_version(spark, tmp_path, monkeypatch, alone):
    """Quality pins silver's latest version and holds no lease. The embedded engine (Sail
    0.7.2) cannot read a version before a later checkpoint, and it checkpoints every tenth
    commit: a real append lands as version 10 while the run checks version 9. Where the
    uniqueness rules read the pinned table (``alone`` False: older rows may share a key),
    the check runs again at version 10 (``delta_ops.version_unreadable``). Where the files'
    statistics show the window alone, nothing reads version 9 through the engine (its rows
    are read by their files, the statistics by delta-rs), and version 9 is checked."""
    if not alone:
        monkeypatch.setattr(quality_job, "alone_in_stats", lambda sl, keys: [False for _ in keys])
    cfg = load_config(overrides={"lake.root": str(tmp_path / "lake")})
    silver = cfg.table_path("silver", "binlog_events")

    def commit(i: int) -> None:
        row = silver_row(100 * (i + 1), "INSERT", str(i), after={"id": i, "name": "x"})
        spark.createDataFrame([row], SILVER_DDL).write.format("delta").mode("append").save(silver)

    for i in range(10):  # versions 0..9
        commit(i)
    real, landed = quality_job.silver_frame, []

    def concurrent_commit(spark_, cfg_, sl):
        if not landed:
            commit(10)
            landed.append(sl.version)
        return real(spark_, cfg_, sl)

    monkeypatch.setattr(quality_job, "silver_frame", concurrent_commit)
    res = run_quality(spark, cfg, write=False)
    assert landed == [9]
    try:  # what the engine makes of the pinned version now
        spark.read.format("delta").option("versionAsOf", 9).load(silver).count()
        readable = True
    except Exception as exc:  # noqa: BLE001
        assert "Missing commit file" in str(exc)
        readable = False
    assert res.silver_version == (9 if readable or alone else 10)
    assert res.rows_checked["silver"] == 1  # the row of the checked version's commit
    assert not [r for r in res.rules if r.status == "error"]


def test_results_table_and_last_quality(spark, bad_lake):
    res = run_quality(spark, bad_lake)
    path = os.path.join(bad_lake.lake_root, "quality", "results")
    stored = (spark.read.format("delta").load(path).where(f"run_id = '{res.run_id}'")
              .select("name", "dataset", "passed_records", "failed_records", "action",
                      "status", "window", "silver_version").collect())
    assert {(r["name"], r["dataset"]): (r["passed_records"], r["failed_records"], r["status"])
            for r in stored} == EXPECTED_LAST_RUN
    assert {r["window"] for r in stored} == {"last-run"}
    assert {r["silver_version"] for r in stored} == {1}
    failures = spark.read.format("delta").load(
        os.path.join(bad_lake.lake_root, "quality", "failures")).where(
        f"run_id = '{res.run_id}' AND name = 'pk_hash_is_sha256'").collect()
    assert [(r["binlog_file"], r["start_pos"], r["table_name"]) for r in failures] == [
        (FILE, 400, "t")]
    last = last_quality(spark, bad_lake)
    assert last["run_id"] == res.run_id and last["status"] == "failed"
    assert {"name": "column_count", "dataset": "quarantine", "status": "failed",
            "failed_records": 2} in last["not_passed"]
    line = summary_line(res)
    assert line.startswith("quality: FAILED") and "column_count (quarantine): 2 failed" in line
    text = render_result(res).splitlines()
    assert text[0] == line and len(text) == 2 + len(EXPECTED_LAST_RUN)
    assert text[1].split() == ["rule", "(dataset)", "on", "failure", "passed", "failed", "status"]
    assert ["column_count", "(quarantine)", "fail", "1", "2", "failed"] in \
        [t.split() for t in text[2:]]
    status = render_last(last)
    assert status.startswith("quality: failed at ") and f"run {res.run_id}" in status
    assert "every_event_named (quarantine): 3 failed" in status
    assert json.loads(json.dumps(result_to_json(res), default=str))["exit_code"] == 1
    assert os.path.isfile(os.path.join(bad_lake.lake_root, "quality", "reports",
                                       f"{res.run_id}.html"))


def test_report_shows_tables_rules_and_failing_keys(spark, bad_lake):
    res = run_quality(spark, bad_lake)
    html = Path(res.report_path).read_text()
    assert "<title>binlake quality" in html and ">failed<" in html
    for name in ("column_count", "every_event_named", "pk_hash_is_sha256", "seq_unique",
                 "bronze_key_unique", "images_match_event_type", "full_images"):
        assert f"<code>{name}</code>" in html.replace("<wbr>", "")
    for table in ("shop.t", "shop.u", "shop.v", "shop.w"):
        assert f"<code>{table}</code>" in html
    assert ">1200</td>" in html and ">UPSERT</td>" in html  # failing keys and rows
    assert "column count 3 in the binlog but 4 in snapshot s0" in html
    assert "9" * 160 + "…" in html  # long values are cut


def test_warn_and_quarantine_actions_do_not_fail_the_run(spark, bad_lake):
    rules = parse_rules({"report": {"sample_rows": 1}, "rules": {
        "hash": {"action": "quarantine", "silver": {
            "expect": "equal", "column": "pk_hash", "expr": "sha2(pk_values, 256)",
            "when": "event_type <> 'UPSERT'"}},
        "unique_key": {"silver": {"action": "warn", "expect": "unique",
                                  "columns": ["source_id", "binlog_file", "start_pos",
                                              "row_in_event"]}},
        "not_upsert": {"silver": {"action": "quarantine", "expect": "in_set",
                                  "column": "event_type", "values": ["INSERT", "UPDATE",
                                                                     "DELETE"]}},
    }})
    res = run_quality(spark, bad_lake, window="all", rules=rules)
    assert counts(res) == {("hash", "silver"): (13, 1, "quarantined"),
                           ("unique_key", "silver"): (13, 2, "warned"),
                           ("not_upsert", "silver"): (14, 1, "quarantined")}
    assert exit_code(res) == 0 and res.status == "warned"
    assert len(res.rule("unique_key", "silver").failing) == 1  # sample_rows
    flagged = spark.read.format("delta").load(
        os.path.join(bad_lake.lake_root, "quality", "failures")).where(
        f"run_id = '{res.run_id}' AND action = 'quarantine'").collect()
    assert sorted(r["start_pos"] for r in flagged) == [400, 1200]


@pytest.mark.parametrize("body, message", [
    ({"r": {"silver": {"expect": "not_null", "column": "x", "action": "stop"}}},
     "quality rule r (silver): action must be warn, quarantine or fail"),
    ({"r": {"gold": {"expect": "not_null", "column": "x", "action": "warn"}}},
     "quality rule r (gold): unknown dataset"),
    ({"r": {"action": "warn", "silver": {"expect": "in_set", "column": "x"}}},
     "quality rule r (silver): expect = \"in_set\" needs values"),
    ({"r": {"action": "warn", "silver": {"expect": "between", "column": "x"}}},
     "quality rule r (silver): expect must be one of"),
    ({"r": {"action": "warn", "silver": {"expect": "null", "column": "x", "colour": 1}}},
     "quality rule r (silver): unknown key(s) colour"),
    ({"r": {"action": "warn", "expect": "null"}}, "quality rule r: unknown key(s) expect"),
    ({"r": {"action": "warn", "silver": {"expect": "unique", "columns": []}}},
     "quality rule r (silver): columns must be a non-empty list"),
])
def test_bad_rules_name_the_rule(body, message):
    with pytest.raises(ConfigError, match=None) as info:
        parse_rules({"rules": body})
    assert message in str(info.value)


@pytest.mark.parametrize("spec, message", [
    ({"expect": "not_null", "column": "no_such"}, "no column no_such in dataset silver"),
    ({"expect": "condition", "condition": "pk_values ==="}, "invalid condition"),
    ({"expect": "condition", "condition": "nope(pk_values)"}, "invalid condition"),
    # checked against the window and the older rows sharing its keys (the last run)
    ({"expect": "unique", "columns": ["seq", "no_such"]}, "no column no_such in dataset silver"),
])
def test_rule_not_fitting_its_dataset_names_the_rule(spark, bad_lake, spec, message):
    rules = parse_rules({"rules": {"bad_one": {"action": "fail", "silver": spec}}})
    with pytest.raises(ConfigError) as info:
        run_quality(spark, bad_lake, rules=rules, write=False)
    assert "quality rule bad_one (silver)" in str(info.value) and message in str(info.value)


def test_shipped_rules_and_windows_parse(tmp_path):
    rules = load_rules()
    names = {(r.name, r.dataset) for r in rules.rules}
    assert names == set(EXPECTED_LAST_RUN)
    assert Window.parse(None) == Window() and str(Window.parse("7d")) == "168h"
    assert Window.parse("all").kind == "all"
    for bad in ("0h", "yesterday", "24m"):
        with pytest.raises(ConfigError, match="--window"):
            Window.parse(bad)
    bad_file = tmp_path / "q.toml"
    bad_file.write_text("[rules.x.silver]\nexpect = 'null'\ncolumn = 'a'\naction = 'maybe'\n")
    with pytest.raises(ConfigError, match=r"quality rule x \(silver\): action"):
        load_rules(bad_file)
    with pytest.raises(ConfigError, match="cannot read"):
        load_rules(tmp_path / "missing.toml")


def test_empty_lake_skips(spark, tmp_path):
    cfg = load_config(overrides={"lake.root": str(tmp_path / "lake")})
    res = run_quality(spark, cfg, write=False)
    assert {r.status for r in res.rules} == {"skipped"} and exit_code(res) == 0
    assert res.silver_version is None
    assert render_report(res).count("skipped") >= len(res.rules)


def test_real_pipeline_over_samples_passes_every_rule(spark, tmp_path):
    """Bronze + silver over the shipped MariaDB binlogs (FULL metadata): all rules pass."""
    from pipelines.bronze.job import run_bronze
    from pipelines.silver.job import run_silver

    cfg = load_config(overrides={"lake.root": str(tmp_path / "lake")})
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), all_files=True)
    silver = run_silver(spark, cfg)
    assert silver.appended == 340 and silver.quarantined == 0
    for window in (None, "all"):
        res = run_quality(spark, cfg, window=window)
        assert res.rows_checked == {"silver": 340, "quarantine": 0}
        assert {r.status for r in res.rules} == {"passed"}, summary_line(res)
        assert all(r.passed_records == 340 for r in res.rules if r.dataset == "silver"
                   and r.name != "pk_values_fit_gold") and exit_code(res) == 0
    tables = {t.table_name: t.rows for t in res.tables if t.dataset == "silver"}
    assert tables["orders"] == 240 and tables["heap"] == 6
    assert summary_line(res).startswith("quality: PASSED, 11 rule(s) over 340 silver row(s)")


def test_index_checks_every_row_of_a_silver_run_that_commits_several_times(tmp_path):
    """`binlake index` with tiny commits: silver commits several times in one run; the
    quality summary counts all 340 rows, not the last commit's."""
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    out = tmp_path / "out.txt"
    import contextlib

    env = {"BINLAKE_BRONZE_COMMIT_MB": "0.002", "BINLAKE_SILVER_COMMIT_MB": "0.002"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with open(out, "w") as fh, contextlib.redirect_stdout(fh):
            assert main(["--lake", str(lake), "index", "--binlog-dir", str(SAMPLES), "--all"]) == 0
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    text = out.read_text()
    assert "quality: PASSED, 11 rule(s) over 340 silver row(s)" in text, text
    from deltalake import DeltaTable

    assert DeltaTable(str(lake / "silver" / "binlog_events")).version() >= 2, "one commit only"


# (row_before, row_after, absent_columns) -> image_column_count, counted by hand: the distinct
# top-level names of both images and of absent_columns; NULL when the row has no image.
IMAGE_COUNTS = [
    ('{"a":1,"b":2}', None, None, 2),                     # INSERT, FULL
    (None, '{"a":1,"b":2,"c":null}', None, 3),            # a NULL value is still a column
    ('{"a":1,"b":2}', '{"a":1,"b":3}', None, 2),          # UPDATE: both images, same names
    ('{"id":1}', '{"x":2}', '["y"]', 3),                  # MINIMAL: id, x and absent y
    ('{"id":1}', '{"id":1,"x":2}', '["x","z"]', 3),       # names in several places once
    ('{"a":{"b":1},"c":[1,2]}', None, None, 2),           # nested values: top-level names
    ('{"a":1}', "not json", None, 1),                     # an unreadable image adds none
    (None, None, '["a"]', None),                          # no image at all
    (None, None, None, None),
]


def test_image_column_count_per_row(spark):
    from pipelines.quality.datasets import with_image_counts

    df = spark.createDataFrame(
        [(i, b, a, x) for i, (b, a, x, _) in enumerate(IMAGE_COUNTS)],
        "i int, row_before string, row_after string, absent_columns string")
    got = {r["i"]: r["image_column_count"] for r in with_image_counts(df).collect()}
    assert got == {i: want for i, (*_, want) in enumerate(IMAGE_COUNTS)}


def test_a_window_past_the_history_is_checked_alone(spark, tmp_path, monkeypatch):
    """The usual run: its rows' keys lie past every older row's (its binlog file numbered
    after the history's). The data files' statistics say so (``file_stats``), so each
    uniqueness rule checks the window's rows alone, as a first run's are checked: no query
    measures their key bounds or counts the table within them. The counts are the context
    path's, and a key held twice within the window is still found."""
    cfg = load_config(overrides={"lake.root": str(tmp_path / "lake")})
    silver = cfg.table_path("silver", "binlog_events")
    older = [silver_row(100 * i, "INSERT", str(i), after={"id": i, "name": "x"}, ts=OLD)
             for i in range(1, 6)]
    window = [silver_row(10_000 + 100 * i, "INSERT", str(i), after={"id": i, "name": "y"})
              for i in range(1, 8)]
    window.append(window[2])  # one row appended twice by the run
    for rows in (older, window):  # versions 0 and 1
        spark.createDataFrame(rows, SILVER_DDL).write.format("delta").mode("append").save(silver)
    measured = []
    real_bounds = quality_job.alone_in_bounds
    monkeypatch.setattr(quality_job, "alone_in_bounds",
                        lambda *a: measured.append(a) or real_bounds(*a))
    alone = counts(run_quality(spark, cfg, write=False))
    assert not measured
    assert alone[("seq_unique", "silver")] == (6, 2, "failed")
    assert alone[("bronze_key_unique", "silver")] == (6, 2, "failed")
    monkeypatch.setattr(quality_job, "alone_in_stats", lambda sl, keys: [False for _ in keys])
    assert counts(run_quality(spark, cfg, write=False)) == alone
    assert len(measured) == 2  # the context path: one count per uniqueness rule
