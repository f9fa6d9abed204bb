"""The warm Spark driver: one SparkSession kept between analyze runs, one run at a time, cancellable.

A new `python -m backend analyze` pays the interpreter, the JVM and the first-query warm-up on every run; this
worker pays them once. It runs ``backend.pipeline.job.run_analysis`` per request, reports the run's summary and
its own memory (Python + JVM), and the supervisor replaces it when that grows past the bound. A stop during a
run lets the run finish for FINISH_GRACE_S, then cancels its Spark jobs: the pipeline's state.json is written
last, so a cancelled run leaves the previous state current, and the next run redoes the work.
"""

from __future__ import annotations

import gc
import logging
import os
import posixpath
import threading
import time
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from backend.service.job_worker import Worker

log = logging.getLogger("backend.service.driver")
FINISH_GRACE_S = 4.0  # a stop waits this long for the run in progress before cancelling it
# The driver JVM lives for many runs: G1 returns freed heap to the OS (after the full GC that follows each run,
# and every 30 s while idle) instead of keeping its high-water mark. Not applied when $PYSPARK_SUBMIT_ARGS is set.
DRIVER_JAVA_OPTIONS = "-XX:+UseG1GC -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:G1PeriodicGCInterval=30000"
SUMMARY_FIELDS = ("full", "full_reason", "skipped", "files_processed", "records_read", "instances",
                  "instances_changed", "alerts_by_severity", "spark_jobs", "spark_stages", "duration_s")


def process_tree_rss(pid: int | None = None) -> int:
    """Resident memory of a process and all its descendants (the driver's JVM is a child of Python), bytes."""
    import psutil

    try:
        root = psutil.Process(pid)
        total = root.memory_info().rss
        for child in root.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                continue
    except psutil.Error:
        return 0
    return int(total)


def recover_interrupted_swaps(lake: str) -> list[str]:
    """Undo what a run stopped between its directory swaps left behind: restore a moved-away table, drop temps.

    Only directories the pipeline's swap creates (results/.tmp-<name>-<hex>, results/.old-<name>-<hex>) are
    touched; call it only while no analyze runs. (The pipeline's state needs no recovery: a generation is
    named by state.json only once written whole.)
    """
    from backend.pipeline.state_store import LakePaths

    paths = LakePaths(lake)
    done: list[str] = []
    for parent in ("results",):
        base = paths.path(parent)
        if paths.fs.get_file_info(base).type != pafs.FileType.Directory:
            continue
        for info in paths.fs.get_file_info(pafs.FileSelector(base)):
            name = info.base_name
            if info.type != pafs.FileType.Directory or not name.startswith((".tmp-", ".old-")):
                continue
            target = posixpath.join(base, name[len(".old-"):].rsplit("-", 1)[0])
            if name.startswith(".old-") and paths.fs.get_file_info(target).type == pafs.FileType.NotFound:
                paths.fs.move(info.path, target)  # the swap moved the table away and stopped: put it back
                done.append(f"restored {target}")
            else:
                paths.fs.delete_dir(info.path)
                done.append(f"removed {info.path}")
    return done


class WarmDriver:
    """One SparkSession for many analyze runs over one lake."""

    def __init__(self, lake: str, master: str | None, driver_host: str | None = None) -> None:
        """Remember where to run; the session starts in start()."""
        self.lake = lake
        self.master = master
        self.driver_host = driver_host
        self.spark: SparkSession | None = None
        self.running = threading.Event()
        self.cancelled = threading.Event()

    def start(self) -> None:
        """Build the session (the product's get_spark: the same settings as a cold run, plus DRIVER_JAVA_OPTIONS)."""
        from backend.pipeline.spark import get_spark

        os.environ.setdefault("PYSPARK_SUBMIT_ARGS",
                              f'--conf "spark.driver.extraJavaOptions={DRIVER_JAVA_OPTIONS}" pyspark-shell')
        self.spark = get_spark(self.master, app_name="fleetview-service", driver_host=self.driver_host,
                               lake=self.lake)

    def run(self, full: bool = False) -> Any:
        """One analysis (incremental unless full); returns run_analysis's summary."""
        from backend.pipeline.job import run_analysis

        for line in recover_interrupted_swaps(self.lake):
            log.warning("analyze: %s (left by an interrupted run)", line)
        self.cancelled.clear()
        self.running.set()
        try:
            return run_analysis(self.lake, master=self.master, full=full, driver_host=self.driver_host,
                                progress=lambda msg: log.info("analyze: %s", msg))
        finally:
            self.running.clear()
            self._collect_garbage()

    def _collect_garbage(self) -> None:
        """A full GC in both runtimes after each run, so the driver's memory returns to its idle size."""
        gc.collect()
        if self.spark is not None:
            try:
                self.spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - a lost JVM is found by alive()
                pass

    def cancel(self, until_s: float = 5.0) -> None:
        """Cancel the Spark jobs of the run in progress until it returns (runs never overlap: all jobs are its jobs).

        Spark cancels only jobs already submitted, and the run goes on to its next action, so this keeps
        cancelling until the run has raised (or until_s passed).
        """
        self.cancelled.set()
        deadline = time.monotonic() + until_s
        while self.spark is not None and self.running.is_set() and time.monotonic() < deadline:
            try:
                self.spark.sparkContext.cancelAllJobs()
            except Exception:  # noqa: BLE001 - a session going away ends the run anyway
                return
            time.sleep(0.1)

    def alive(self) -> bool:
        """Whether the session's JVM side still answers."""
        if self.spark is None:
            return False
        try:
            return not self.spark.sparkContext._jsc.sc().isStopped()  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a lost gateway raises anything
            return False

    def stop(self) -> None:
        """Stop the session (and its JVM)."""
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception as exc:  # noqa: BLE001 - stopping a broken session
                log.warning("analyze: stopping Spark: %s", exc)
            self.spark = None


def _summary_detail(summary: Any) -> dict[str, Any]:
    return {name: getattr(summary, name) for name in SUMMARY_FIELDS if hasattr(summary, name)}


def run_analyze_worker(worker: Worker, lake: str, master: str | None, *, driver_host: str | None = None) -> int:
    """Serve run requests ({"full": bool}) with one warm driver until stopped; exit 3 when the driver is lost."""
    driver = WarmDriver(lake, master, driver_host)
    began = time.monotonic()
    driver.start()
    worker.send("hello", startup_s=time.monotonic() - began, rss_bytes=process_tree_rss())

    def stopper() -> None:
        worker.stop.wait()
        if driver.running.is_set():
            deadline = time.monotonic() + FINISH_GRACE_S
            while driver.running.is_set() and time.monotonic() < deadline:
                time.sleep(0.1)
            if driver.running.is_set():
                log.warning("analyze: stopping: cancelling the run in progress (the previous state stays current)")
                driver.cancel()

    threading.Thread(target=stopper, name="analyze-stopper", daemon=True).start()
    code = 0
    try:
        while not worker.stop.is_set():
            request = worker.next_request(1.0)
            if request is None:
                continue
            full = bool(request.get("full"))
            run_id = request.get("id")
            worker.send("start", id=run_id, full=full)
            started = time.monotonic()
            try:
                summary = driver.run(full=full)
            except Exception as exc:  # noqa: BLE001 - a failed run is its outcome
                outcome = "cancelled" if driver.cancelled.is_set() else "error"
                worker.send("done", id=run_id, outcome=outcome, duration_s=time.monotonic() - started,
                            error=f"{type(exc).__name__}: {str(exc)[:1500]}",
                            detail={"full": full, "rss_bytes": process_tree_rss()})
                if outcome == "error" and not driver.alive():
                    log.error("analyze: the Spark driver is lost; exiting so the service starts a new one")
                    code = 3
                    break
                continue
            worker.send("done", id=run_id, outcome="ok", duration_s=time.monotonic() - started,
                        detail={**_summary_detail(summary), "rss_bytes": process_tree_rss()})
    finally:
        driver.stop()
    return code
