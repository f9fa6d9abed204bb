"""The Spark job on a real Spark standalone cluster: a master and two workers in processes of their own (separate
work directories), from the pyspark package's own jars.

`python -m backend analyze --master spark://...` on a lake in S3 (SeaweedFS, read as s3a:// through hadoop-aws and the
AWS SDK bundle of `make s3a-jars`) and `spark-submit --master spark://... spark_analyze.py` on a local lake must write
the same results tables, row for row, as a `local[2]` run of the same records on a local lake; a write through Spark
to s3a:// goes through the S3A magic committer. The workers have the lake's credentials from their environment (as an
instance role would give them), never from Spark's configuration.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.configs.ingest import ingest_sink
from backend.pipeline.job import SPARK_RESULTS
from backend.pipeline.spark import SHORT_RUN_JAVA_OPTIONS, SMALL_RUN_PARTITIONS, s3a_classpath
from backend.store import progress
from backend.store.tables import read_table
from tests.rig.objectstores import S3Server
from tests.rig.spark_cluster import SPARK_HOME, SparkCluster, spark_env, start_cluster
from tests.unit.configs.helpers import cfg, record, write_jsonl

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, seaweed_s3: S3Server) -> Iterator[SparkCluster]:
    """A standalone master and two workers (1 core, 1.5 GiB each, own work dirs) on 127.0.0.1; the workers' (and so
    their executors') credentials for the lake come from their environment."""
    cluster = start_cluster(tmp_path_factory.mktemp("spark-standalone"), 2, env=seaweed_s3.env())
    try:
        yield cluster
    finally:
        cluster.stop()


def _sink(root: Path) -> Path:
    """A PushConfig sink of 24 instances: two clusters, producers and consumers."""
    sink = root / "sink"
    records = []
    for i in range(24):
        configs = [cfg("acks", ["all", "1", "-1"][i % 3]), cfg("linger.ms", str(5 * (i % 4)), "LONG"),
                   cfg("compression.type", ["lz4", "zstd"][i % 2]), cfg("enable.idempotence", ["true", "False"][i % 2],
                                                                      "BOOLEAN")]
        if i % 4 == 0:
            configs = [cfg("group.id", f"g{i % 3}"), cfg("auto.offset.reset", ["earliest", "latest"][i % 2]),
                       cfg("enable.auto.commit", "true", "BOOLEAN")]
        records.append(record(configs, cluster_id=["east", "west"][i % 2], client_id=f"app-{i % 5}",
                              client_type="consumer" if i % 4 == 0 else "producer",
                              software=("apache-kafka-java", ["3.9.0", "2.8.1"][i % 2])))
    write_jsonl(sink / "a.jsonl", records)
    return sink


def _lake(root: Path) -> Path:
    """A small local lake of that sink, through the real ingest."""
    lake = root / "lake"
    assert ingest_sink(str(lake), _sink(root)).records_written == 24
    return lake


def _results(lake: Path | str) -> dict[str, list[str]]:
    out = {}
    for name in SPARK_RESULTS:
        rows = read_table(str(lake), f"results/{name}").to_pylist()
        out[name] = sorted(json.dumps({k: v for k, v in r.items() if k not in ("computed_at", "alert_id")},
                                      sort_keys=True, default=str) for r in rows)
    return out


def _run(cmd: list[str], tmp: Path, s3: S3Server | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=REPO, env=spark_env(tmp, s3.env() if s3 else None), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _apps(work: Path) -> set[str]:
    return {p.name for p in work.glob("app-*") if any(p.glob("*/stderr"))}


def test_analyze_on_a_standalone_cluster_equals_local(spark_cluster: SparkCluster, seaweed_s3: S3Server,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = _lake(tmp_path / "local")
    submitted = tmp_path / "submit" / "lake"
    shutil.copytree(local, submitted)
    # The same records ingested into a lake in S3: nothing of it on a local disk the workers could share.
    for key, value in seaweed_s3.env().items():
        monkeypatch.setenv(key, value)
    progress.forget_versions()
    bucket = seaweed_s3.new_bucket("cluster")
    on_s3 = f"s3://{bucket}/lake"
    assert ingest_sink(on_s3, tmp_path / "local" / "sink").records_written == 24

    cold = _run([sys.executable, "-m", "backend", "analyze", "--lake", str(local), "--master", "local[2]"], tmp_path)
    # a small lake in a process of its own: the JVM starts with the short-run options
    assert "small run: no whole-stage code generation; JVM" in cold.stdout, cold.stdout
    assert all(flag in cold.stdout for flag in SHORT_RUN_JAVA_OPTIONS.split()), cold.stdout
    done = _run([sys.executable, "-m", "backend", "analyze", "--lake", on_s3, "--master", spark_cluster.url],
                tmp_path, seaweed_s3)
    sized = re.search(r"(\d+) shuffle partitions for \d+ rows on (\d+) cores", done.stdout)
    assert sized, done.stdout  # sized for this master too, not Spark's 200
    assert int(sized.group(1)) == SMALL_RUN_PARTITIONS < 200 and int(sized.group(2)) == 2  # two workers' cores
    ran = [_apps(work) for work in spark_cluster.work_dirs]
    assert all(ran) and ran[0] == ran[1], ran  # the application's executors ran on both workers

    # spark-submit with the jars an existing cluster is given, on a local lake; then a write to s3a:// through Spark
    jars = s3a_classpath()
    assert jars, "make s3a-jars has not run: .cache/s3a holds no hadoop-aws"
    output = f"s3a://{bucket}/spark-write"
    _run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", spark_cluster.url, "--conf", "spark.executor.memory=1g",
          "--driver-class-path", jars, "--conf", f"spark.executor.extraClassPath={jars}",
          str(REPO / "tests" / "integration" / "pipeline" / "spark_s3a_write.py"), output, "--",
          "--lake", str(submitted)], tmp_path, seaweed_s3)

    expected = _results(local)
    assert sum(len(rows) for rows in expected.values()) > 20  # a real result set, not empty tables
    assert _results(on_s3) == expected
    assert _results(submitted) == expected
    success = json.loads(seaweed_s3.read(bucket, "spark-write/_SUCCESS"))
    assert success["committer"] == "magic" and len(success["filenames"]) == 4, success
    secret = seaweed_s3.secret_key
    for work in spark_cluster.work_dirs:  # the workers' logs and the apps' files never hold the secret
        for path in work.rglob("*"):
            if path.is_file() and path.stat().st_size < 5_000_000:
                assert secret not in path.read_text(errors="replace"), path
