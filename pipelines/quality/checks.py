"""Run :class:`Rule` objects with great-expectations 1.x on a Spark DataFrame.

One ephemeral GE context per call (in memory, analytics and progress bars off), a Spark data
source with a whole-DataFrame batch, one :class:`ExpectationSuite` and one
:class:`ValidationDefinition`; the DataFrame is passed as the batch parameter. This is the
plain GE 1.x API and works the same on Spark Connect (Sail) and on classic Spark/Databricks.

Rules written as SQL become helper columns first (``__expected_<n>`` for ``equal``,
``__ok_<n>`` for ``condition``), so every rule is a column expectation and GE reports the
failing rows' keys (``unexpected_index_column_names``): a sample of ``sample_rows`` per rule,
or all of them for ``quarantine`` rules (result format COMPLETE).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.errors import ConfigError
from pipelines.quality import unique_passes
from pipelines.quality.rules import Action, Expect, Rule

__all__ = ["Outcome", "KeyPass", "validate", "check_rules_against", "failing_rows",
           "key_counts", "hashed_key_counts", "key_pass", "unique_measures", "unique_filters",
           "considered"]


@dataclass(frozen=True)
class KeyPass:
    """One grouped pass of a UNIQUE rule: its rows per key (``exact``, :func:`key_counts`'
    shape) and, when it can be asked first, per hash of the key (``hashed``,
    :func:`hashed_key_counts`)."""

    exact: DataFrame
    hashed: DataFrame | None = None


@dataclass(frozen=True)
class Outcome:
    """What GE found for one rule: rows checked, rows failing, and failing rows' columns."""

    rule: Rule
    checked: int
    failed: int
    failing: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    expectation: str = ""

    @property
    def passed(self) -> int:
        return max(self.checked - self.failed, 0)


def check_rules_against(df: DataFrame, rules: Sequence[Rule]) -> None:
    """Raise :class:`ConfigError` naming the first rule whose columns or SQL do not fit ``df``."""
    columns = set(df.columns)
    if all(c in columns for rule in rules for c in rule.columns_used):
        sqls = [sql for rule in rules for sql in (rule.expr, rule.condition, rule.when) if sql]
        if not sqls:  # columns alone: nothing more for the engine to analyse
            return
        try:  # every rule's SQL analysed in one query plan (one plan: ~45 ms on JVM Spark)
            df.select(*[F.expr(sql).alias(f"_rule{i}")  # noqa: B018 - forces analysis
                        for i, sql in enumerate(sqls)]).schema
            return
        except Exception:  # noqa: BLE001 - one does not fit: the loop below names the first
            pass
    for rule in rules:
        missing = [c for c in rule.columns_used if c not in columns]
        if missing:
            raise ConfigError(f"quality rule {rule.label}: no column {', '.join(missing)} in "
                              f"dataset {rule.dataset} (columns: {', '.join(sorted(columns))})")
        for key in ("expr", "condition", "when"):
            sql = getattr(rule, key)
            if sql is None:
                continue
            try:
                df.select(F.expr(sql)).schema  # noqa: B018 - forces analysis
            except Exception as exc:  # noqa: BLE001 - parse/analysis errors differ per engine
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ConfigError(f"quality rule {rule.label}: invalid {key} {sql!r}: "
                                  f"{first}") from exc


def _expectation(rule: Rule, i: int):
    """The GE expectation for ``rule`` (helper columns named by index ``i``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _construct(rule, i)


def _construct(rule: Rule, i: int):
    import great_expectations as gx

    E = gx.expectations
    common: dict[str, Any] = {"meta": {"rule": rule.name, "dataset": rule.dataset, "i": i}}
    if rule.when:
        # GE >= 1.9 deprecates string row conditions in favour of Condition objects, which
        # cannot hold arbitrary SQL; the Spark parser still takes it (warning silenced in _expectation).
        common.update(row_condition=rule.when, condition_parser="spark")
    if rule.expect is Expect.NOT_NULL:
        return E.ExpectColumnValuesToNotBeNull(column=rule.column, **common)
    if rule.expect is Expect.NULL:
        return E.ExpectColumnValuesToBeNull(column=rule.column, **common)
    if rule.expect is Expect.IN_SET:
        return E.ExpectColumnValuesToBeInSet(column=rule.column, value_set=list(rule.values),
                                             **common)
    if rule.expect is Expect.UNIQUE:
        if len(rule.columns) == 1:
            return E.ExpectColumnValuesToBeUnique(column=rule.columns[0], **common)
        return E.ExpectCompoundColumnsToBeUnique(column_list=list(rule.columns), **common)
    if rule.expect is Expect.EQUAL:
        return E.ExpectColumnPairValuesToBeEqual(column_A=rule.column, column_B=f"__expected_{i}",
                                                 **common)
    # CONDITION: the SQL boolean as a column, NULL counting as false.
    return E.ExpectColumnValuesToBeInSet(column=f"__ok_{i}", value_set=[True], **common)


def _prepare(df: DataFrame, rules: Sequence[Rule]) -> DataFrame:
    for i, rule in enumerate(rules):
        if rule.expect is Expect.EQUAL:
            df = df.withColumn(f"__expected_{i}", F.expr(rule.expr))
        elif rule.expect is Expect.CONDITION:
            df = df.withColumn(f"__ok_{i}", F.coalesce(F.expr(rule.condition), F.lit(False)))
    return df


def _context():
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig, InMemoryStoreBackendDefaults, ProgressBarsConfig,
    )

    return gx.get_context(mode="ephemeral", project_config=DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(), analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False)))


def _error_text(result) -> str | None:
    info = result.exception_info or {}
    if "raised_exception" not in info and info:  # keyed by metric id in some GE paths
        info = next(iter(info.values()), {}) or {}
    if info.get("raised_exception"):
        return str(info.get("exception_message") or "great-expectations raised an exception")
    return None


def _run_suite(df: DataFrame, items: Sequence[tuple[int, Rule]], *, name: str,
               report_columns: Sequence[str], complete: bool, sample_rows: int
               ) -> dict[int, Outcome]:
    """One GE validation of ``items`` (rule index in the caller's list, rule) on ``df``."""
    import great_expectations as gx

    ctx = _context()
    batch = (ctx.data_sources.add_spark("spark").add_dataframe_asset(name)
             .add_batch_definition_whole_dataframe("window"))
    result_format: dict[str, Any] = {
        "result_format": "COMPLETE" if complete else "SUMMARY",
        "unexpected_index_column_names": list(report_columns),
        "partial_unexpected_count": max(sample_rows, 1),
        "return_unexpected_index_query": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # see _expectation
        suite = ctx.suites.add(gx.ExpectationSuite(name=name))
        for i, rule in items:
            suite.add_expectation(_expectation(rule, i))
        vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch,
                                                                    suite=suite))
        res = vd.run(batch_parameters={"dataframe": df}, result_format=result_format)
    by_index = {r.expectation_config.meta["i"]: r for r in res.results}
    out: dict[int, Outcome] = {}
    for i, rule in items:
        r = by_index.get(i)
        if r is None:
            out[i] = Outcome(rule, 0, 0, error="great-expectations returned no result")
            continue
        result = dict(r.result or {})
        rows = result.get("unexpected_index_list" if complete
                          else "partial_unexpected_index_list") or []
        failing = tuple({c: row.get(c) for c in report_columns if c in row}
                        for row in rows if isinstance(row, dict))
        out[i] = Outcome(rule, int(result.get("element_count") or 0),
                         int(result.get("unexpected_count") or 0),
                         failing if complete else failing[:sample_rows], _error_text(r),
                         r.expectation_config.type)
    return out


def _expectation_type(rule: Rule) -> str:
    """The name of the GE expectation ``_construct`` builds for ``rule`` (without importing
    great-expectations, which takes seconds, when every rule passes)."""
    if rule.expect is Expect.UNIQUE:
        return ("expect_column_values_to_be_unique" if len(rule.columns) == 1
                else "expect_compound_columns_to_be_unique")
    return {Expect.NOT_NULL: "expect_column_values_to_not_be_null",
            Expect.NULL: "expect_column_values_to_be_null",
            Expect.IN_SET: "expect_column_values_to_be_in_set",
            Expect.EQUAL: "expect_column_pair_values_to_be_equal",
            Expect.CONDITION: "expect_column_values_to_be_in_set"}[rule.expect]


def considered(rule: Rule) -> Column:
    """The rows a rule looks at (its ``when``; NULL counts as false), as a Column."""
    return F.coalesce(F.expr(rule.when), F.lit(False)) if rule.when else F.lit(True)


def _fails(rule: Rule):
    """The rows ``rule`` rejects among those it considers (not UNIQUE), as GE defines them."""
    if rule.expect is Expect.NOT_NULL:
        return F.col(rule.column).isNull()
    if rule.expect is Expect.NULL:
        return F.col(rule.column).isNotNull()
    if rule.expect is Expect.IN_SET:
        col = F.col(rule.column)
        return col.isNotNull() & ~col.isin(list(rule.values))
    if rule.expect is Expect.EQUAL:
        return ~F.col(rule.column).eqNullSafe(F.expr(rule.expr))
    return ~F.coalesce(F.expr(rule.condition), F.lit(False))


def _any_value(columns: Sequence[str]):
    out = F.lit(False)
    for c in columns:
        out = out | F.col(c).isNotNull()
    return out


def _counts(df: DataFrame, rules: Sequence[Rule],
            unique_groups: Sequence[KeyPass] | None = None) -> list[tuple[int, int]]:
    """(rows considered, rows failing) per rule: every rule but UNIQUE in one aggregate pass
    over ``df``, each UNIQUE rule in grouped passes of its own (no aggregate pass when every
    rule is UNIQUE and the engine spills: a uniqueness rule checked against its history runs
    alone). Where the engine holds aggregates in memory the aggregate pass also measures each
    UNIQUE rule's rows, which ``unique_passes`` splits into passes of bounded size.
    ``unique_groups``: the passes, given (``df`` is one UNIQUE rule's dataset)."""
    rows_per_pass = 0 if unique_groups is not None else unique_passes.pass_rows(df)
    aggs = []
    for i, rule in enumerate(rules):
        seen = considered(rule)
        if rule.expect is not Expect.UNIQUE:
            aggs.append(F.sum(F.when(seen, 1).otherwise(0)).alias(f"__seen_{i}"))
            aggs.append(F.sum(F.when(seen & _fails(rule), 1).otherwise(0)).alias(f"__bad_{i}"))
        elif rows_per_pass:
            aggs += unique_passes.bounds(df, rule, seen, i)
    totals = df.agg(*aggs).collect()[0].asDict() if aggs else {}
    return [_unique_counts(rule, unique_groups if unique_groups is not None else
                           [key_pass(df if where is None else df.where(where), rule)
                            for where in unique_passes.passes(df, rule, totals, i,
                                                              rows_per_pass, considered(rule))])
            if rule.expect is Expect.UNIQUE
            else (int(totals[f"__seen_{i}"] or 0), int(totals[f"__bad_{i}"] or 0))
            for i, rule in enumerate(rules)]


def key_counts(df: DataFrame, rule: Rule) -> DataFrame:
    """UNIQUE ``rule``'s keys in ``df`` with the rows it considers per key (``count``)."""
    return df.where(considered(rule)).groupBy(*rule.columns).count()


def hashed_key_counts(df: DataFrame, rule: Rule) -> DataFrame:
    """UNIQUE ``rule``'s rows in ``df`` that it considers, per 64-bit hash of their key
    (``__h``, xxhash64; NULL for a key whose parts are all NULL, never a duplicate), with
    the rows per hash (``count``). Rows sharing a key share its hash, so a pass where no two
    rows share a hash holds no duplicate. On the embedded engine grouping by one bigint took
    ~35% less time than grouping by the key's columns, a string among them, and left less
    memory behind (docs/performance.md, Quality)."""
    cols = list(rule.columns)
    key_hash = F.when(_any_value(cols), F.xxhash64(*[F.col(c) for c in cols]))
    return df.where(considered(rule)).groupBy(key_hash.alias("__h")).count()


def key_pass(df: DataFrame, rule: Rule) -> KeyPass:
    """The pass of UNIQUE ``rule`` over ``df``: its hashes asked first, its keys if needed."""
    return KeyPass(key_counts(df, rule), hashed_key_counts(df, rule))


def _unique_counts(rule: Rule, groups: Sequence[KeyPass]) -> tuple[int, int]:
    """A UNIQUE rule's (rows considered, rows sharing their key with another) from its
    passes (no key in two of them), summed: one query per pass, the hashes' (where given)
    when no two rows share a hash, else the keys' (:func:`key_counts`; rows sharing a hash
    may not share the key). A key whose parts are all NULL is considered but never a
    duplicate (as GE counts)."""
    cols = list(rule.columns)
    dup = F.when((F.col("count") > 1) & _any_value(cols), F.col("count"))
    shared = F.when((F.col("count") > 1) & F.col("__h").isNotNull(), F.col("count"))
    seen = dups = 0
    for p in groups:
        if p.hashed is not None:
            row = p.hashed.agg(F.sum("count").alias("seen"), F.sum(shared).alias("shared")
                               ).collect()[0]
            if not row["shared"]:
                seen += int(row["seen"] or 0)
                continue
        row = p.exact.agg(F.sum("count").alias("seen"), F.sum(dup).alias("dup")).collect()[0]
        seen += int(row["seen"] or 0)
        dups += int(row["dup"] or 0)
    return seen, dups


def unique_measures(df: DataFrame, rule: Rule, i: int = 0) -> list[Column]:
    """Aggregates over ``df`` that size UNIQUE ``rule``'s passes (``unique_passes``, named
    for rule ``i``); none where the engine spills (one pass)."""
    return unique_passes.bounds(df, rule, considered(rule), i) if unique_passes.pass_rows(df) \
        else []


def unique_filters(df: DataFrame, rule: Rule, totals: Mapping[str, Any],
                   i: int = 0) -> list[Column | None]:
    """The filters splitting UNIQUE ``rule``'s rows of ``df`` into passes of bounded size,
    from :func:`unique_measures`' ``totals`` (``[None]``: one pass)."""
    return unique_passes.passes(df, rule, totals, i, unique_passes.pass_rows(df),
                                considered(rule))


def validate(df: DataFrame, rules: Sequence[Rule], *, report_columns: Sequence[str],
             sample_rows: int = 20, name: str = "dataset",
             unique_groups: Sequence[KeyPass] | None = None) -> list[Outcome]:
    """Validate ``rules`` on ``df``; one :class:`Outcome` per rule, in rule order.

    Every rule is first counted in one pass over ``df`` (``_counts``); great-expectations
    then validates only the rules that found failing rows, for its counts and their keys.
    ``report_columns`` are recorded for each failing row (those ``df`` lacks are skipped):
    ``sample_rows`` of them per rule, every one for ``quarantine`` rules.
    ``unique_groups``: when ``rules`` is one UNIQUE rule, its passes (:class:`KeyPass`;
    default: ``df``'s, split into passes by ``unique_passes``). Raises
    :class:`ConfigError` when a rule's columns or SQL do not fit ``df``.
    """
    if not rules:
        return []
    check_rules_against(df, rules)
    found: dict[int, Outcome] = {}
    failing = []
    for i, (rule, (seen, bad)) in enumerate(zip(rules, _counts(df, rules, unique_groups))):
        if bad:
            failing.append(i)
        else:
            found[i] = Outcome(rule, seen, 0, expectation=_expectation_type(rule))
    if failing:
        found.update(validate_with_ge(df, [rules[i] for i in failing],
                                      report_columns=report_columns, sample_rows=sample_rows,
                                      name=name, indexes=failing))
    return [found[i] for i in range(len(rules))]


def validate_with_ge(df: DataFrame, rules: Sequence[Rule], *, report_columns: Sequence[str],
                     sample_rows: int = 20, name: str = "dataset",
                     indexes: Sequence[int] | None = None) -> dict[int, Outcome]:
    """Validate ``rules`` with great-expectations (several engine jobs per rule); the
    Outcomes keyed by ``indexes`` (default: the rules' positions)."""
    keys = list(indexes) if indexes is not None else list(range(len(rules)))
    cols = [c for c in report_columns if c in df.columns]
    prepared = _prepare(df, rules)
    found: dict[int, Outcome] = {}
    for complete in (False, True):
        items = [(i, r) for i, r in enumerate(rules) if (r.action is Action.QUARANTINE) == complete]
        if items:
            found.update(_run_suite(prepared, items, name=name + ("-all" if complete else ""),
                                    report_columns=cols, complete=complete,
                                    sample_rows=sample_rows))
    return {keys[i]: o for i, o in found.items()}


def failing_rows(df: DataFrame, rule: Rule) -> DataFrame:
    """The rows of ``df`` that ``rule`` rejects, by the same definition GE applies.

    Used for the per-table breakdown of a rule that failed (GE reports totals and a sample).
    """
    from pyspark.sql.window import Window as W

    if rule.when:
        df = df.where(F.coalesce(F.expr(rule.when), F.lit(False)))
    if rule.expect is Expect.NOT_NULL:
        return df.where(F.col(rule.column).isNull())
    if rule.expect is Expect.NULL:
        return df.where(F.col(rule.column).isNotNull())
    if rule.expect is Expect.IN_SET:
        col = F.col(rule.column)
        return df.where(col.isNotNull() & ~col.isin(list(rule.values)))
    if rule.expect is Expect.EQUAL:
        return df.where(~F.col(rule.column).eqNullSafe(F.expr(rule.expr)))
    if rule.expect is Expect.CONDITION:
        return df.where(~F.coalesce(F.expr(rule.condition), F.lit(False)))
    cols = list(rule.columns)
    any_value = F.lit(False)
    for c in cols:
        any_value = any_value | F.col(c).isNotNull()
    copies = F.count(F.lit(1)).over(W.partitionBy(*cols))
    return (df.where(any_value).withColumn("__copies", copies)
            .where(F.col("__copies") > 1).drop("__copies"))
