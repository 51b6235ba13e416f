"""Differential: the columnar silver renderer against the row-by-row one it replaced (issue 13).

Every bronze row change of every corpus file, and of the type-matrix workload written by a
real MariaDB server (FULL metadata; MINIMAL metadata named by a snapshot taken after an
ALTER, so the epoch before it is quarantined), goes through both
``render_batch.BatchRenderer`` and ``tests/support/silver_reference.py``; the silver rows
and the quarantine rows (with their reasons) must be identical, field by field.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipelines.binlog import coltypes as T
from pipelines.bronze.decode_task import decode_file_batches
from pipelines.bronze.records import BRONZE_SCHEMA
from pipelines.bronze.table_maps import table_maps_in, with_facts
from pipelines.mysql.dsn import Dsn
from pipelines.silver.naming import NamingPlan
from pipelines.silver.render_batch import BatchRenderer
from pipelines.silver.render_worker import render_batches
from pipelines.source.schema import take_snapshot
from devtools.mariadb import MariaDBServer
from tests.support.silver_reference import reference_rows
from devtools.mixed_workload import run_mixed_workload

_KEY = ("binlog_file", "start_pos", "row_in_event")
_CHANGES = pa.array(["INSERT", "UPDATE", "DELETE"])
UTF8MB4_GENERAL_CI, BINARY = 45, 63


def _decoded(paths: list[Path], batch_rows: int, *, source_per_file: bool = False,
             facts: bool = True) -> list[pa.RecordBatch]:
    """Bronze batches of ``paths``; ``facts``: each row change with its TABLE_MAP facts on
    the row (as older bronze had them: the reference reads them there), else as bronze
    writes them now (named by table_map_hash)."""
    out = []
    for i, p in enumerate(paths):
        out += decode_file_batches(str(p), source_id=f"src{i}" if source_per_file else "src",
                                   subprocess=False, batch_rows=batch_rows)
    if facts:
        maps = table_maps_in(out)
        out = [with_facts(b, maps) for b in out]
    return out


def _plan(batches: list[pa.RecordBatch], snapshots=()) -> NamingPlan:
    ddl = []
    for b in batches:
        q = b.filter(pc.equal(b.column("event_type"), "QUERY"))
        ddl += [tuple(r.values()) for r in q.select(
            ["source_id", "binlog_file", "start_pos", "schema_name", "query"]).to_pylist()]
    plan = NamingPlan.build(ddl, list(snapshots))
    plan.table_maps = table_maps_in(batches)
    return plan


def _changes(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    out = [b.filter(pc.is_in(b.column("event_type"), _CHANGES)) for b in batches]
    return [b for b in out if b.num_rows]


def _named(batch: pa.RecordBatch, charset: int) -> pa.RecordBatch:
    """The batch with column names and one character set for the columns the binlog left
    unnamed (MINIMAL metadata), so the corpus's values get rendered rather than quarantined."""
    counts = batch.column("column_count").to_pylist()
    names = [v if v is not None else [f"c{i}" for i in range(k)]
             for v, k in zip(batch.column("column_names").to_pylist(), counts)]
    sets = [v if v is not None else [charset] * k
            for v, k in zip(batch.column("column_charsets").to_pylist(), counts)]
    for field, values, typ in (("column_names", names, pa.list_(pa.string())),
                               ("column_charsets", sets, pa.list_(pa.int32()))):
        batch = batch.set_column(batch.schema.get_field_index(field), field,
                                 pa.array(values, typ))
    return batch


def _both(batches: list[pa.RecordBatch], plan: NamingPlan) -> tuple[tuple, tuple]:
    renderer = BatchRenderer(plan)
    new_silver, new_held, old_silver, old_held = [], [], [], []
    for b in batches:
        silver, held = renderer.render(b)
        new_silver += silver.to_pylist()
        new_held += held.to_pylist()
        s, q = reference_rows(b.to_pylist(), plan)
        old_silver += s
        old_held += q

    def key(r):
        return tuple(r[k] for k in _KEY)

    return ((sorted(new_silver, key=key), sorted(new_held, key=key)),
            (sorted(old_silver, key=key), sorted(old_held, key=key)))


def _assert_same(new: list[dict], old: list[dict], what: str) -> None:
    assert len(new) == len(old), f"{what}: {len(new)} rows, the reference {len(old)}"
    for a, b in zip(new, old):
        assert a == b, f"{what} at {[a[k] for k in _KEY]}: " + str(
            {k: (a[k], b[k]) for k in a if a[k] != b[k]})


def _corpus_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*") if p.is_file() and p.name != "MANIFEST.md"
                  and "expected" not in p.relative_to(corpus).parts)


def test_corpus_renders_as_the_reference(corpus: Path) -> None:
    rendered = held = 0
    for n, path in enumerate(_corpus_files(corpus)):
        batches = _decoded([path], batch_rows=300)
        plan = _plan(batches)
        changes = _changes(batches)
        # As the binlog names them (mostly quarantined: MINIMAL metadata, no snapshot), then
        # named, alternately as utf8mb4 text and as bytes.
        for variant in (changes, [_named(b, BINARY if n % 2 else UTF8MB4_GENERAL_CI)
                                  for b in changes]):
            (silver, quarantine), (ref_silver, ref_quarantine) = _both(variant, plan)
            _assert_same(silver, ref_silver, f"{path.name} silver")
            _assert_same(quarantine, ref_quarantine, f"{path.name} quarantine")
            rendered += len(silver)
            held += len(quarantine)
    assert rendered > 10_000 and held > 10_000  # both paths were exercised


@pytest.mark.mariadb
@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_type_matrix_workload_renders_as_the_reference(tmp_path: Path, metadata: str) -> None:
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    with MariaDBServer(binlog_row_metadata=metadata) as server:
        with server.connect() as conn:
            summary = run_mixed_workload(conn, alter_mid_stream=True)
        server.flush_logs()
        snapshots = []
        if metadata == "MINIMAL":
            snapshot, _ = take_snapshot(Dsn.parse(server.dsn()), source_id="src",
                                        schemas=["shop", "ops"])
            snapshots.append(snapshot)
        for f in server.binlog_files():
            shutil.copy(f, binlogs / f.name)
    batches = _decoded(sorted(binlogs.iterdir()), batch_rows=1000)
    (silver, quarantine), (ref_silver, ref_quarantine) = _both(
        _changes(batches), _plan(batches, snapshots))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(quarantine, ref_quarantine, "quarantine")
    assert len(silver) + len(quarantine) == summary.total_row_changes
    if metadata == "MINIMAL":
        assert quarantine and silver  # the pre-ALTER epoch has no valid snapshot
    else:
        assert not quarantine


def _row(**kw) -> dict:
    base = {f.name: None for f in BRONZE_SCHEMA}
    base.update(source_id="src", server_id=1, binlog_file="bin.000001", end_pos=900,
                event_timestamp=None, schema_name="db", table_name="t", column_count=3,
                column_types=[T.LONG, T.ENUM, T.VARCHAR], column_meta=[0, 1, 40],
                column_names=["id", "e", "v"], column_charsets=[None, None, 45],
                primary_key=[0], enum_values=[None, ["a", "b"], None])
    base.update(kw)
    return base


def test_unrenderable_rows_get_the_reference_reason() -> None:
    """The first failing check decides the reason: before image, after image, then the key."""
    import datetime as dt

    ts = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
    rows = [
        _row(start_pos=100, row_in_event=0, event_type="INSERT", event_timestamp=ts,
             row_after=[b"1", b"2", b"ok"]),
        _row(start_pos=100, row_in_event=1, event_type="INSERT", event_timestamp=ts,
             row_after=[b"2", b"7", b"\xff"]),  # ENUM index 7 before invalid utf8mb4
        _row(start_pos=100, row_in_event=2, event_type="INSERT", event_timestamp=ts,
             row_after=[b"3", b"1"]),  # two values for three columns
        _row(start_pos=200, row_in_event=0, event_type="UPDATE", event_timestamp=ts,
             row_before=[b"4", b"1", b"\xfe"], row_after=[b"4", b"9", b"x"]),
        _row(start_pos=200, row_in_event=1, event_type="UPDATE", event_timestamp=ts,
             row_before=[None, b"1", b"x"], before_present=[False, True, True],
             row_after=[b"5", b"1", b"y|\\"]),  # key column absent from the before image
        _row(start_pos=300, row_in_event=0, event_type="DELETE", event_timestamp=ts,
             row_after=[b"6", b"1", b"x"]),  # a DELETE without its before image
        _row(start_pos=300, row_in_event=1, event_type="DELETE", event_timestamp=ts,
             row_before=[b"7", None, b"a\nb\"c"]),
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=BRONZE_SCHEMA)
    (silver, quarantine), (ref_silver, ref_quarantine) = _both([batch], NamingPlan.build([], []))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(quarantine, ref_quarantine, "quarantine")
    assert [r["start_pos"] for r in silver] == [100, 300]
    reasons = [r["reason"] for r in quarantine]
    assert "ENUM index 7" in reasons[0] and "2 values" in reasons[1]
    assert "not valid utf8mb4" in reasons[2] and "primary key column id" in reasons[3]
    assert "without its key image" in reasons[4]


def test_row_changes_named_by_table_map_hash_render_as_with_their_facts(corpus: Path) -> None:
    """Bronze names a row change's TABLE_MAP facts by table_map_hash (its TABLE_MAP rows): the
    renderer looks them up in the plan and renders exactly what the same rows carrying their
    facts give; a hash the plan lacks quarantines the rows, never guessed."""
    paths = _corpus_files(corpus)[:12]
    hashed = _decoded(paths, 250, source_per_file=True, facts=False)
    plan = _plan(hashed)
    maps = plan.table_maps
    assert maps and all(b.column("column_types").null_count == b.num_rows
                        for b in _changes(hashed))
    with_own = [with_facts(b, maps) for b in _changes(hashed)]
    assert sum(b.column("column_types").null_count for b in with_own) == 0
    renderer, reference = BatchRenderer(plan), BatchRenderer(plan)
    for b, own in zip(_changes(hashed), with_own):
        assert [t.to_pylist() for t in renderer.render(b)] == \
            [t.to_pylist() for t in reference.render(own)]
    plan.table_maps = {}
    silver, held = BatchRenderer(plan).render(_changes(hashed)[0])
    assert silver.num_rows == 0 and held.num_rows == _changes(hashed)[0].num_rows
    assert "TABLE_MAP row" in held.column("reason")[0].as_py()


def test_facts_fill_a_batch_of_some_columns_only() -> None:
    """``with_facts`` on silver's input (no ``column_nullable``): each column it has is filled
    from its own map, never from another column's position."""
    from pipelines.silver.transform import BRONZE_INPUT

    sample = Path(__file__).resolve().parents[2] / "samples" / "binlogs" / "mariadb-bin.000003"
    hashed = _decoded([sample], 100, facts=False)
    maps = table_maps_in(hashed)
    full = [with_facts(b, maps) for b in _changes(hashed)]
    some = [with_facts(b.select(BRONZE_INPUT), maps) for b in _changes(hashed)]
    assert [b.to_pylist() for b in some] == [b.select(BRONZE_INPUT).to_pylist() for b in full]
    assert all(b.column("column_names").null_count == 0 for b in some)


def test_worker_processes_return_the_batches_in_order(corpus: Path) -> None:
    decoded = _decoded(_corpus_files(corpus), 200, source_per_file=True)
    batches = [_named(b, UTF8MB4_GENERAL_CI) for b in _changes(decoded)]
    plan = _plan(decoded)
    # Batches of 200 rows, joined into batches of at least 250 (two engine batches each).
    for quarantine in (False, True):
        inline = list(render_batches(batches, plan, quarantine=quarantine, workers=0,
                                     batch_rows=250))
        forked = list(render_batches(batches, plan, quarantine=quarantine, workers=2,
                                     batch_rows=250))
        # the same rows in the same order (in this process a batch comes as one per group)
        assert [r for b in forked for r in b.to_pylist()] == \
            [r for b in inline for r in b.to_pylist()]
        if not quarantine:
            silver = inline
    held = sum(b.num_rows for b in inline)
    assert len(silver) > 10 and held > 0
    assert sum(b.num_rows for b in silver) + held == sum(b.num_rows for b in batches)


def test_the_batch_size_changes_the_batches_not_the_rows(corpus: Path) -> None:
    # Silver renders render_worker.BATCH_ROWS rows per batch (16,384); the rows must not
    # depend on how they are batched.
    decoded = _decoded(_corpus_files(corpus), 200, source_per_file=True)
    batches = [_named(b, UTF8MB4_GENERAL_CI) for b in _changes(decoded)]
    plan = _plan(decoded)

    def rows(quarantine: bool, batch_rows: int) -> list[dict]:
        out = [r for b in render_batches(batches, plan, quarantine=quarantine, workers=0,
                                         batch_rows=batch_rows) for r in b.to_pylist()]
        return sorted(out, key=lambda r: tuple(r[k] for k in _KEY))

    total = sum(b.num_rows for b in batches)
    for quarantine in (False, True):
        small, whole = rows(quarantine, 250), rows(quarantine, total)
        assert small == whole and small
    assert len(rows(False, 250)) + len(rows(True, 250)) == total


def test_a_worker_failure_names_its_cause() -> None:
    """A value no kernel can read (JSON bytes that are not UTF-8) fails the task with the
    worker's error, not a silent exit."""
    import datetime as dt

    from pipelines.errors import EngineError

    ts = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
    bad = _row(start_pos=100, row_in_event=0, event_type="INSERT", event_timestamp=ts,
               column_count=2, column_types=[T.LONG, T.JSON], column_meta=[0, 4],
               column_names=["id", "j"], column_charsets=[None, None],
               enum_values=None, row_after=[b"1", b"\xff"])
    batch = pa.RecordBatch.from_pylist([bad], schema=BRONZE_SCHEMA)
    with pytest.raises(EngineError, match="silver rendering failed in process"):
        list(render_batches([batch, batch], NamingPlan.build([], []), quarantine=False,
                            workers=1, batch_rows=1))


def test_rows_events_of_two_tables_at_one_position() -> None:
    """A TRANSACTION_PAYLOAD's inner rows events share the payload's position and number
    their rows on: each row is named by its own table's TABLE_MAP, not the first one's."""
    import datetime as dt

    ts = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
    other = dict(table_name="u", column_count=2, column_types=[T.VARCHAR, T.LONG],
                 column_meta=[40, 0], column_names=["name", "n"], column_charsets=[45, None],
                 primary_key=[1], enum_values=None)
    rows = [
        _row(start_pos=100, row_in_event=0, event_type="INSERT", event_timestamp=ts,
             row_after=[b"1", b"2", b"ok"]),
        _row(start_pos=100, row_in_event=1, event_type="INSERT", event_timestamp=ts,
             row_after=[b"abc", b"7"], **other),
        _row(start_pos=100, row_in_event=2, event_type="INSERT", event_timestamp=ts,
             row_after=[b"2", b"1", b"x"]),
        _row(start_pos=100, row_in_event=3, event_type="DELETE", event_timestamp=ts,
             row_before=[b"d", b"8"], **other),
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=BRONZE_SCHEMA)
    (silver, quarantine), (ref_silver, ref_quarantine) = _both([batch], NamingPlan.build([], []))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(quarantine, ref_quarantine, "quarantine")
    assert not quarantine
    assert [(r["table_name"], r["pk_values"]) for r in silver] == [
        ("t", "1"), ("u", "7"), ("t", "2"), ("u", "8")]
