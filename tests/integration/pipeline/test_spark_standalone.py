"""The Spark job on a real Spark standalone cluster (master + one worker from the pyspark package's own jars).

`python -m backend analyze --master spark://...` and `spark-submit --master spark://... spark_analyze.py` must
write the same results tables as a `local` run of the same lake.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from backend.configs.ingest import ingest_sink
from backend.pipeline.job import SPARK_RESULTS
from backend.pipeline.spark import SHORT_RUN_JAVA_OPTIONS, SMALL_RUN_PARTITIONS
from backend.store.tables import read_table
from tests.conftest import free_port
from tests.unit.configs.helpers import cfg, record, write_jsonl

REPO = Path(__file__).resolve().parents[3]
SPARK_HOME = Path(pyspark.__file__).resolve().parent


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (1 core, 2 GiB) on 127.0.0.1; yields the master URL."""
    spark_class = SPARK_HOME / "bin" / "spark-class"
    assert spark_class.is_file(), f"the pyspark package has no {spark_class}"  # a failure, never a skip
    tmp = tmp_path_factory.mktemp("spark-standalone")
    env = _env(tmp)
    port, ui, worker_ui = free_port(), free_port(), free_port()
    procs = []
    try:
        with (tmp / "master.log").open("wb") as log:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        url = f"spark://127.0.0.1:{port}"
        with (tmp / "worker.log").open("wb") as log:
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--cores", "1", "--memory", "2g", "--webui-port", str(worker_ui), "--work-dir", str(tmp / "work")],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 120
        while True:
            try:
                workers = _json(f"http://127.0.0.1:{ui}/json/").get("workers", [])
                if any(w.get("state") == "ALIVE" for w in workers):
                    break
            except OSError:
                pass
            assert all(p.poll() is None for p in procs), (tmp / "master.log").read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "no worker registered with the master in 120 s"
            time.sleep(0.5)
        yield url
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _lake(root: Path) -> Path:
    """A small lake: two clusters, producers and consumers, through the real ingest."""
    sink, lake = root / "sink", root / "lake"
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
    assert ingest_sink(str(lake), sink).records_written == 24
    return lake


def _results(lake: Path) -> dict[str, list[str]]:
    out = {}
    for name in SPARK_RESULTS:
        rows = read_table(str(lake), f"results/{name}").to_pylist()
        out[name] = sorted(json.dumps({k: v for k, v in r.items() if k not in ("computed_at", "alert_id")},
                                      sort_keys=True, default=str) for r in rows)
    return out


def _run(cmd: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=REPO, env=_env(tmp), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_analyze_on_a_standalone_cluster_equals_local(spark_cluster: str, tmp_path: Path) -> None:
    local = _lake(tmp_path / "local")
    on_cluster = tmp_path / "cluster" / "lake"
    submitted = tmp_path / "submit" / "lake"
    shutil.copytree(local, on_cluster)
    shutil.copytree(local, submitted)

    cold = _run([sys.executable, "-m", "backend", "analyze", "--lake", str(local), "--master", "local[2]"], tmp_path)
    # a small lake in a process of its own: the JVM starts with the short-run options
    assert "small run: no whole-stage code generation; JVM" in cold.stdout, cold.stdout
    assert all(flag in cold.stdout for flag in SHORT_RUN_JAVA_OPTIONS.split()), cold.stdout
    done = _run([sys.executable, "-m", "backend", "analyze", "--lake", str(on_cluster), "--master", spark_cluster],
                tmp_path)
    sized = re.search(r"(\d+) shuffle partitions for \d+ rows on (\d+) cores", done.stdout)
    assert sized, done.stdout  # sized for this master too, not Spark's 200
    assert int(sized.group(1)) == SMALL_RUN_PARTITIONS < 200  # a small lake
    _run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", spark_cluster, "--conf", "spark.executor.memory=1g",
          str(REPO / "spark_analyze.py"), "--lake", str(submitted)], tmp_path)

    expected = _results(local)
    assert sum(len(rows) for rows in expected.values()) > 20  # a real result set, not empty tables
    assert _results(on_cluster) == expected
    assert _results(submitted) == expected
