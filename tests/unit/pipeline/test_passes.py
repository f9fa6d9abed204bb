"""The two Spark passes and the driver's steps equal the reference transforms, and plan as written."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from backend.pipeline import heads as H
from backend.pipeline import passes
from backend.pipeline import results as RS
from backend.pipeline import rules as R
from backend.pipeline.spark import SMALL_RUN_ROWS, size_session
from backend.pipeline.state_store import COUNT_SCHEMA, empty_tables
from backend.store.config_schemas import arrow_schema, spark_schema
from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import T0, instance_id, rows_for, small_fleet

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 8  # the shuffle partitions of a run that is not small, on the 2-core test session


def _fleet() -> list[dict[str, Any]]:
    """small_fleet with rule-breaking producers, a list spelling, an old client, an untyped one, empty values."""
    rows = small_fleet()
    rows += rows_for("B1", {"enable.idempotence": "TRUE", "acks": "1", "retries": "0",
                            "max.in.flight.requests.per.connection": "9", "client.id": "producer-3"},
                     client_id=None)
    rows += rows_for("B2", {"batch.size": "0", "buffer.memory": "10", "acks": "-1", "client.rack": ""}, cluster="west")
    rows += rows_for("D1", {"acks": "all", "linger.ms": "5", "client.rack": None}, cluster="west")
    rows += rows_for("L1", {"partition.assignment.strategy": "[a, b]", "group.id": " g2 ",
                            "session.timeout.ms": "1000", "heartbeat.interval.ms": "3000"},
                     client_type="consumer", software=("apache-kafka-java", "2.0.0"))
    rows += rows_for("L1", {"group.id": "g2"}, client_type="consumer", at=T0 - timedelta(minutes=5))  # older
    rows += rows_for("X1", {"transactional.id": None, "acks": "1"}, client_type=None, cluster="west")
    return rows


def _write(directory: Path, files: dict[str, list[dict[str, Any]]]) -> list[str]:
    """client_configs Parquet files as ingest writes them; returns their Spark paths."""
    (directory / "date=2026-11-20").mkdir(parents=True, exist_ok=True)
    for name, rows in files.items():
        pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema("client_configs")),
                       directory / "date=2026-11-20" / f"{name}.parquet")
    return [f"file://{directory}/date=2026-11-20/{name}.parquet" for name in files]


def _fold(spark: SparkSession, paths: list[str], uri: str, state: dict[str, pa.Table] | None = None
          ) -> tuple[dict[str, pa.Table], pa.Table, pa.Table]:
    """One run's Spark work and its fold into the state, as the job does it: (state, changed, replaced)."""
    state = state or empty_tables()
    rows = passes.read_rows(spark, paths)
    new, _, _ = H.heads_of(passes.snapshot_table(rows), uri)
    after, changed, replaced = H.supersede(state["heads"], new)
    wanted, classes = H.wanted(changed, replaced)
    files = sorted({*paths, *(f"{uri}/{f}" for fs in replaced["files"].to_pylist() for f in fs)})
    out = passes.instance_pass(passes.read_rows(spark, files), spark.createDataFrame(wanted), PARTITIONS)
    delta = out.filter(pc.is_null(out["rule_id"]))
    cls = delta["cls"].to_numpy()
    delta = pa.table({**{c: pa.array(classes[c].to_numpy()[cls], pa.string()) for c in H.CLASS_COLUMNS},
                      **{c: delta[c] for c in ("key", "raw_value", "type", "is_default", "n")}}).cast(COUNT_SCHEMA)
    keys = [c for c in COUNT_SCHEMA.names if c != "n"]
    counts = pa.concat_tables([state["counts"], delta]).group_by(keys).aggregate([("n", "sum")]).select(
        [*keys, "n_sum"]).rename_columns([*keys, "n"])
    fired = out.filter(pc.is_valid(out["rule_id"]))
    fired = pa.table({H.IDS: pc.take(wanted[H.IDS], fired["sid"]), "rule_id": fired["rule_id"],
                      "observed_json": fired["observed_json"]})
    kept = state["alerts"].filter(pc.invert(pc.is_in(state["alerts"][H.IDS],
                                                                        value_set=changed[H.IDS])))
    return ({"heads": after, "counts": counts.filter(pc.not_equal(counts["n"], 0)),
             "alerts": pa.concat_tables([kept, fired.cast(kept.schema)])}, changed, replaced)


def _spark(spark: SparkSession, frame: pd.DataFrame, like: DataFrame) -> DataFrame:
    frame = frame[like.columns].astype(object).where(frame[like.columns].notna(), None)
    return spark.createDataFrame(list(frame.itertuples(index=False, name=None)), like.schema)


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str, DataFrame]:
    # the settings of a run that is not small (whole-stage code generation on), as the big runs get
    assert size_session(spark, SMALL_RUN_ROWS + 1).shuffle_partitions == PARTITIONS
    root = tmp_path_factory.mktemp("passes") / "client_configs"
    rows = _fleet()
    twice = rows_for("D2", {"acks": "all", "linger.ms": "5"}, cluster="west")
    paths = _write(root, {"a": rows, "b": twice, "b-again": twice})  # one file ingested twice
    return paths, f"file://{root}", passes.read_rows(spark, paths).cache()


@pytest.fixture(scope="module")
def state(spark: SparkSession, lake: tuple[list[str], str, DataFrame]) -> dict[str, pa.Table]:
    paths, uri, _ = lake
    return _fold(spark, paths, uri)[0]


def test_heads_are_the_latest_snapshots(lake: tuple[list[str], str, DataFrame], state: dict[str, pa.Table]) -> None:
    _, _, rows = lake
    heads = state["heads"].to_pandas()
    expected = T.instances(T.latest_snapshots(rows)).toPandas()
    assert len(heads) == heads[H.IDS].nunique() == len(expected) == 15
    key = [H.IDS, "snapshot_id"]
    assert heads[key].sort_values(key).values.tolist() == expected[key].sort_values(key).values.tolist()
    l1 = heads[heads[H.IDS] == instance_id("L1")].iloc[0]
    # group.id as normalised (blanks kept: only lists and booleans lose them), from the latest snapshot
    assert (l1["group_id"], l1["rows"], list(l1["files"])) == (" g2 ", 4, ["date=2026-11-20/a.parquet"])
    d2 = heads[heads[H.IDS] == instance_id("D2")].iloc[0]
    assert d2["rows"] == 4 and sorted(d2["files"]) == ["date=2026-11-20/b-again.parquet", "date=2026-11-20/b.parquet"]
    assert heads[heads[H.IDS] == instance_id("B1")].iloc[0]["cfg_client_id"] == "producer-3"


def test_ties_and_clashing_keys_have_one_answer(spark: SparkSession, tmp_path: Path) -> None:
    """Same received_at: the greater snapshot_id wins; a key reported twice: the smaller spelling."""
    low = rows_for("T1", {"acks": "1"}, snapshot="00000000-0000-4000-8000-000000000000")
    high = rows_for("T1", {"acks": "0", "linger.ms": "5"}, snapshot="ffffffff-ffff-4fff-bfff-ffffffffffff")
    clash = rows_for("K1", {"acks": "all"}) + rows_for("K1", {"acks": "1", "linger.ms": "5"})
    spellings = rows_for("K2", {"acks": "all"}) + rows_for("K2", {"acks": "-1"})  # one value, two spellings
    tables, _, _ = _fold(spark, _write(tmp_path, {"t": low + high + clash + spellings + spellings}), f"file://{tmp_path}")
    counts = tables["counts"].to_pandas()
    got = {(c, r): n for c, r, n in zip(counts["key"], counts["raw_value"], counts["n"], strict=True)}
    assert got == {("acks", "0"): 1, ("linger.ms", "5"): 2, ("acks", "1"): 1, ("acks", "-1"): 1}
    (t1,) = [h for h in tables["heads"].to_pylist() if h[H.IDS] == instance_id("T1")]
    assert t1["snapshot_id"].startswith("ffffffff")


def _count_frames(spark: SparkSession, state: dict[str, pa.Table]) -> dict[str, pd.DataFrame]:
    return RS.count_frames(state["counts"], state["heads"])


def test_the_pass_gives_every_count_table(spark: SparkSession, lake: tuple[list[str], str, DataFrame],
                                          state: dict[str, pa.Table]) -> None:
    _, _, rows = lake
    latest = T.latest_snapshots(rows)
    reference = {"value_counts": T.value_counts(latest), "group_counts": T.group_counts(latest),
                 "version_counts": T.version_counts(latest), "client_id_counts": T.client_id_counts(latest)}
    frames = _count_frames(spark, state)
    for name, expected in reference.items():
        assert expected.count() > 0, name
        assertDataFrameEqual(_spark(spark, frames[name], expected), expected)


def test_a_refresh_folds_into_the_state(spark: SparkSession, lake: tuple[list[str], str, DataFrame],
                                        state: dict[str, pa.Table], tmp_path: Path) -> None:
    paths, uri, rows = lake
    later = T0 + timedelta(hours=1)
    new = (rows_for("P3", {"acks": "0", "linger.ms": "7"}, at=later)  # updated
           + rows_for("C3", {"group.id": "other", "session.timeout.ms": "10000"}, client_type="consumer", at=later)
           + rows_for("N1", {"acks": "0"}, cluster="west", at=later)  # new
           + rows_for("P4", {"acks": "1"}, at=T0 - timedelta(hours=2)))  # older: changes nothing
    root = Path(uri.removeprefix("file://"))
    after, changed, replaced = _fold(spark, _write(root, {"r1": new}), uri, state)
    assert sorted(changed[H.IDS].to_pylist()) == sorted(instance_id(n) for n in ("P3", "C3", "N1"))
    assert sorted(replaced[H.IDS].to_pylist()) == sorted(instance_id(n) for n in ("P3", "C3"))
    latest = T.latest_snapshots(passes.read_rows(spark, [*paths, f"{uri}/date=2026-11-20/r1.parquet"]))
    frames = _count_frames(spark, after)
    for name, counts in (("value_counts", T.value_counts), ("group_counts", T.group_counts),
                         ("version_counts", T.version_counts)):
        assertDataFrameEqual(_spark(spark, frames[name], counts(latest)), counts(latest))
    alerts = RS.instance_alerts(after["alerts"], after["heads"].to_pandas(), {})
    assertDataFrameEqual(_spark(spark, alerts, T.instance_alerts(T.instance_configs(latest))),
                         T.instance_alerts(T.instance_configs(latest)))


def test_the_rules_equal_the_reference(spark: SparkSession, lake: tuple[list[str], str, DataFrame],
                                       state: dict[str, pa.Table]) -> None:
    _, _, rows = lake
    expected = T.instance_alerts(T.instance_configs(T.latest_snapshots(rows)))
    got = RS.instance_alerts(state["alerts"], state["heads"].to_pandas(), {})
    assert {r["rule_id"] for r in expected.collect()} >= {"CC001", "CC002", "CC003", "CC006", "CC009", "CC014", "CC015"}
    assertDataFrameEqual(_spark(spark, got, expected), expected)


def test_every_rule_case_equals_the_reference(spark: SparkSession, tmp_path: Path) -> None:
    """The crafted fire / near-miss instance of every rule (tests/unit/pipeline/test_rules.py), CC018 included."""
    from tests.unit.pipeline.test_rules import BROKERS
    from tests.unit.pipeline.test_rules import _fleet as rule_fleet

    tables, _, _ = _fold(spark, _write(tmp_path, {"rules": rule_fleet()}), f"file://{tmp_path}")
    latest = T.latest_snapshots(passes.read_rows(spark, [f"file://{tmp_path}/date=2026-11-20/rules.parquet"]))
    configs = T.instance_configs(latest)
    majors = T.broker_major_versions(spark.createDataFrame(BROKERS, T.BROKER_COLUMNS))
    expected = T.instance_alerts(configs).unionByName(
        T.client_too_old_alerts(T.too_old_clients(T._with_ids(configs)), majors))
    newest = {c: max(at for c2, at, *_ in BROKERS if c2 == c) for c, *_ in BROKERS}  # the current brokers
    brokers = R.broker_majors((c, v, m, p) for c, at, v, m, p in BROKERS if at == newest[c])
    assert brokers == {r["cluster_id"]: (r["broker_major"], r["broker_version"]) for r in majors.collect()}
    got = RS.instance_alerts(tables["alerts"], tables["heads"].to_pandas(), brokers)
    assert expected.count() >= 19
    assertDataFrameEqual(_spark(spark, got, expected), expected)


def _plan_text(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_the_instance_pass_plans_one_shuffle_of_rows_and_one_broadcast(lake: tuple[list[str], str, DataFrame],
                                                                       state: dict[str, pa.Table],
                                                                       spark: SparkSession) -> None:
    """The rows are shuffled by snapshot (the rule keys' rows a second time, filtered); the driver's table is
    broadcast once; the counts' aggregation is the only other exchange; no sort-merge join, no window."""
    paths, _, _ = lake
    wanted, _ = H.wanted(state["heads"], state["heads"].slice(0, 0))
    text = _plan_text(passes.instance_frame(passes.read_rows(spark, paths), spark.createDataFrame(wanted), PARTITIONS))
    exchanges = [line.split("Exchange ")[1].split("#")[0] for line in text.splitlines() if "Exchange hash" in line]
    assert exchanges == ["hashpartitioning(cls", "hashpartitioning(sid", "hashpartitioning(sid"], text
    assert text.count("+- BroadcastExchange") == 1 and text.count("+- ReusedExchange") == 1, text
    assert "SortMergeJoin" not in text and "Window" not in text and "SortAggregate" in text, text


MODULES = {"F", "pa", "pc", "np", "pd"}  # calls on these are functions of Spark SQL, pyarrow, numpy, pandas


def test_the_job_takes_no_action_but_the_two_collects() -> None:
    """No count(), collect() ... in the job; the passes' only actions are their two collects (toArrow)."""
    def calls(name: str) -> list[str]:
        tree = ast.parse((ROOT / "backend" / "pipeline" / name).read_text(encoding="utf-8"))
        return [node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") not in MODULES]

    actions = {"count", "collect", "toPandas", "first", "take", "show", "toArrow", "write"}
    assert not actions & set(calls("job.py"))
    assert [c for c in calls("passes.py") if c in actions - {"first"}] == ["toArrow", "toArrow"]


def test_backend_keeps_only_the_path_that_runs() -> None:
    """The row-level reference transforms live with the tests; the job's modules do not use them."""
    for path in (ROOT / "backend" / "pipeline").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for call in ("dropDuplicates(", "collect_list(", "collect_set(", "max_by(", "array_sort(", "Window"):
            assert call not in text, (path.name, call)


def test_results_on_the_driver_equal_the_spark_transforms(spark: SparkSession) -> None:
    """results.py (pandas, from the count tables) against the reference Spark transforms; "" is not null."""
    from tests.unit.pipeline.fleet import frame
    from tests.unit.pipeline.test_counts import _fleet as counts_fleet

    latest = T.latest_snapshots(frame(spark, _fleet() + counts_fleet()[len(small_fleet()):])).cache()
    counts = {"value_counts": T.value_counts(latest), "group_counts": T.group_counts(latest),
              "version_counts": T.version_counts(latest)}
    tables = RS.results_tables({name: df.toPandas() for name, df in counts.items()})
    dist = T.distributions(latest)
    reference = {
        "distributions": dist, "default_share": T.default_share(latest),
        "numeric_summary": T.numeric_summary(latest), "drift_clusters": T.drift_clusters(dist),
        "drift_keys": T.drift_keys(dist, T.drift_clusters(dist)), "group_drift": T.group_drift(latest),
        "client_versions": T.client_versions(latest),
    }
    now = datetime.now(UTC)
    for name, expected in reference.items():
        schema = spark_schema(name)
        columns = [f.name for f in schema.fields if f.name not in ("computed_at", "schema_version")]
        got = spark.createDataFrame(RS.to_arrow(tables[name], name, now).to_pylist(), schema)
        assert expected.count() > 0, name
        assertDataFrameEqual(got.select(*columns),
                             expected.select(*[F.col(c).cast(schema[c].dataType) for c in columns]))
    assert any(r is None for r in tables["drift_keys"]["client_type"])  # untyped clients kept
    rack = tables["distributions"][tables["distributions"]["key"] == "client.rack"]
    assert sorted(rack["value"].tolist(), key=str) == ["", None]  # pandas hashes "\x00none" like "": not a marker
    fleet = RS.group_disagreement_alerts(tables["group_drift"])
    assert {a["group_id"] for a in fleet} == {"orders"} and all(a["keys"] for a in fleet)
