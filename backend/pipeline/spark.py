"""The one place a SparkSession is built."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "FLEETVIEW_SPARK_MASTER"


def resolve_master(master: str | None) -> str | None:
    """The master to set: explicit, else $FLEETVIEW_SPARK_MASTER, else local[*].

    Returns None under spark-submit (which already chose the master).
    """
    if master:
        return master
    if os.environ.get(MASTER_ENV):
        return os.environ[MASTER_ENV]
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # launched by spark-submit
        return None
    return DEFAULT_MASTER


def get_spark(master: str | None = None, app_name: str = "fleetview-pipeline") -> SparkSession:
    """Build (or reuse) the SparkSession: quiet logs, UTC, few shuffle partitions when local."""
    from pyspark.sql import SparkSession

    resolved = resolve_master(master)
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.parquet.compression.codec", "zstd")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        # The UI is off, but Spark still keeps every query's plan text and metrics for it: keep
        # few, and cap the text, so a long-lived session (tests, repeated runs) does not fill the
        # heap with the plans of earlier runs.
        .config("spark.sql.ui.retainedExecutions", "50")
        .config("spark.ui.retainedJobs", "100")
        .config("spark.ui.retainedStages", "100")
        .config("spark.sql.maxPlanStringLength", "200000")
    )
    if resolved is not None:
        builder = builder.master(resolved)
    if resolved is not None and resolved.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "4").config(
            "spark.default.parallelism", "4"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
