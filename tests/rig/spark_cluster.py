"""A Spark standalone cluster from the pyspark wheel's own jars: a master and N workers, each a process of its own with
its own work directory, bound to 127.0.0.1 (bin/spark-class, as sbin/start-*.sh would run them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from tests.rig.procs import LOG_FILES, REPO, RigError, free_port, log_tail

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def spark_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the cluster's processes and of the drivers and spark-submit runs against it."""
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "PYTHONPATH": str(REPO),
            **(extra or {})}


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@dataclass
class SparkCluster:
    """A running standalone cluster: the master's URL and each worker's work directory."""

    url: str
    work_dirs: list[Path]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    def stop(self) -> None:
        """SIGTERM each process group (workers first), SIGKILL after 20 s."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)


def start_cluster(tmp: Path, workers: int = 2, *, cores: int = 1, memory: str = "1536m",
                  env: dict[str, str] | None = None, timeout_s: float = 180.0) -> SparkCluster:
    """Start a master and `workers` workers; returns once every worker has registered. ``env``: added to the
    processes' environment (the workers pass it on to their executors: the lake's credentials, say)."""
    spark_class = SPARK_HOME / "bin" / "spark-class"
    if not spark_class.is_file():
        raise RigError(f"the pyspark package has no {spark_class}")
    tmp.mkdir(parents=True, exist_ok=True)
    base = spark_env(tmp, env)
    port, ui = free_port(), free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", [tmp / f"worker-{i}" for i in range(1, workers + 1)])
    try:
        master_log = tmp / "master.log"
        LOG_FILES.append(master_log)
        with master_log.open("wb") as log:
            cluster.procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                env=base, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        for i, work in enumerate(cluster.work_dirs, 1):
            work.mkdir(parents=True, exist_ok=True)
            worker_log = tmp / f"worker-{i}.log"
            LOG_FILES.append(worker_log)
            with worker_log.open("wb") as log:
                cluster.procs.append(subprocess.Popen(
                    [str(spark_class), "org.apache.spark.deploy.worker.Worker", cluster.url, "--host", "127.0.0.1",
                     "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                     "--work-dir", str(work)],
                    env={**base, "SPARK_WORKER_DIR": str(work)}, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                alive = sum(w.get("state") == "ALIVE" for w in _json(f"http://127.0.0.1:{ui}/json/").get("workers", []))
                if alive == workers:
                    return cluster
            except OSError:
                pass
            if any(p.poll() is not None for p in cluster.procs):
                raise RigError(f"a Spark process exited:\n{log_tail(master_log)}")
            if time.monotonic() > deadline:
                raise RigError(f"{workers} workers did not register in {timeout_s:.0f} s:\n{log_tail(master_log)}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
