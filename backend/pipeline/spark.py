"""The one place a SparkSession is built."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "FLEETVIEW_SPARK_MASTER"
PARTITIONS_ENV = "FLEETVIEW_SPARK_SHUFFLE_PARTITIONS"
# Client-config Parquet (dictionary-encoded, zstd) is about 8x smaller than its rows in a shuffle.
EXPANSION = 8
TARGET_PARTITION_BYTES = 64 * 1024 * 1024
MAX_PARTITIONS = 400
BROADCAST_BYTES = 32 * 1024 * 1024  # count tables and instance-id lists are broadcast, never shuffled
# A small run (a few hundred instances) spends most of its time starting the JVM and warming it
# up. Up to SMALL_RUN_BYTES of input (and state), a run gets SMALL_RUN_PARTITIONS shuffle
# partitions and no whole-stage code generation (compiling each stage's Java costs more than it
# saves on so few rows); a short-lived process (one `analyze`, then exit) also starts its JVM
# with C1 only and the serial GC. C1-only code is slower at steady state, so never a session
# that outlives one run (docs/spark.md, "Small runs").
SMALL_RUN_BYTES = 256 * 1024  # the synthetic benchmark fleet: about 10,000 instances
SMALL_RUN_PARTITIONS = 2
SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The driver's RPC and block-manager ports are unauthenticated unless spark.authenticate is on, and the driver
# holds every cluster's client configs: it listens on loopback unless the fleet file names a reachable address
# (`spark_driver_host`, for a remote master; docs/spark.md, "Where the driver listens").
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class SizedSettings:
    """Spark SQL settings chosen for one run from its input size and the cluster's cores (docs/spark.md)."""

    input_bytes: int
    cores: int
    shuffle_partitions: int
    advisory_partition_bytes: int
    broadcast_bytes: int
    overridden: bool = False
    small: bool = False  # SMALL_RUN_PARTITIONS, and no whole-stage code generation

    @property
    def whole_stage_codegen(self) -> bool:
        """Whole-stage code generation: on, except for a small run."""
        return not self.small


def sized_settings(input_bytes: int, cores: int, override: int | None = None, *,
                   small: bool | None = None) -> SizedSettings:
    """Shuffle partitions = clamp(input × EXPANSION / 64 MiB, 2 × cores, 400); AQE coalesces what is too small.

    A small run (``small``, by default input_bytes ≤ SMALL_RUN_BYTES) gets SMALL_RUN_PARTITIONS.
    """
    cores = max(1, cores)
    small = input_bytes <= SMALL_RUN_BYTES if small is None else small
    wanted = math.ceil(max(0, input_bytes) * EXPANSION / TARGET_PARTITION_BYTES)
    partitions = SMALL_RUN_PARTITIONS if small else min(MAX_PARTITIONS, max(2 * cores, wanted))
    if override is not None:
        partitions = override
    return SizedSettings(input_bytes, cores, partitions, TARGET_PARTITION_BYTES, BROADCAST_BYTES,
                         override is not None, small)


def size_session(spark: SparkSession, input_bytes: int, *, small: bool | None = None) -> SizedSettings:
    """Apply sized_settings to a session for the coming run, whatever its master; returns what was set.

    ``$FLEETVIEW_SPARK_SHUFFLE_PARTITIONS`` overrides the partition count.
    """
    raw = os.environ.get(PARTITIONS_ENV, "").strip()
    override = int(raw) if raw.isdigit() and int(raw) > 0 else None
    sized = sized_settings(input_bytes, spark.sparkContext.defaultParallelism, override, small=small)
    for key, value in (
        ("spark.sql.shuffle.partitions", sized.shuffle_partitions),
        ("spark.sql.codegen.wholeStage", str(sized.whole_stage_codegen).lower()),
        ("spark.sql.adaptive.enabled", "true"),
        ("spark.sql.adaptive.coalescePartitions.enabled", "true"),
        ("spark.sql.adaptive.advisoryPartitionSizeInBytes", sized.advisory_partition_bytes),
        ("spark.sql.autoBroadcastJoinThreshold", sized.broadcast_bytes),
        # A join on (instance, key) may use rows already partitioned by instance alone: the
        # instance pass shuffles its rows once and keeps every later join inside the partitions.
        ("spark.sql.requireAllClusterKeysForCoPartition", "false"),
    ):
        spark.conf.set(key, str(value))
    return sized


def jvm_flags(spark: SparkSession) -> list[str]:
    """The -XX options the driver JVM runs with, as the JVM reports them."""
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # type: ignore[union-attr]
    return [str(arg) for arg in bean.getInputArguments() if str(arg).startswith("-XX:")]


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


def driver_address(resolved_master: str | None, driver_host: str | None) -> str | None:
    """Where a driver this process starts listens: the fleet file's spark_driver_host, else loopback.

    None under spark-submit (which set the driver's address itself).
    """
    if driver_host:
        return driver_host
    return None if resolved_master is None else LOOPBACK


def get_spark(master: str | None = None, app_name: str = "fleetview-pipeline", *,
              short_lived: bool = False, driver_host: str | None = None) -> SparkSession:
    """Build (or reuse) the SparkSession: quiet logs, UTC, few shuffle partitions when local.

    ``short_lived``: this process runs one small job and exits; a JVM this call starts gets
    SHORT_RUN_JAVA_OPTIONS. A session that already runs keeps its JVM as it is.
    ``driver_host``: the address the driver binds and advertises (default: 127.0.0.1, see driver_address).
    """
    from pyspark import SparkContext
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
        # A task of the instance pass holds several small hash tables at once (one per join and
        # group-by inside its partition); each takes at least one page, so pages are kept small.
        .config("spark.buffer.pageSize", "2m")
    )
    if resolved is not None:
        builder = builder.master(resolved)
    address = driver_address(resolved, driver_host)
    if address is not None:
        builder = builder.config("spark.driver.host", address).config("spark.driver.bindAddress", address)
    if short_lived and resolved is not None and SparkContext._active_spark_context is None:
        builder = builder.config("spark.driver.extraJavaOptions", SHORT_RUN_JAVA_OPTIONS)
    if resolved is not None and resolved.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "4").config(
            "spark.default.parallelism", "4"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
