"""The one place a SparkSession is built."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from backend.store.location import LakeLocation, parse_lake, s3_endpoint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "FLEETVIEW_SPARK_MASTER"
PARTITIONS_ENV = "FLEETVIEW_SPARK_SHUFFLE_PARTITIONS"
# Partitions are sized from rows (Parquet footers), never from compressed bytes: client-config
# Parquet compresses anywhere from 8x to 60x, so bytes gave a 1,000,000-instance fleet 8 partitions.
ROWS_PER_PARTITION = 500_000
MAX_PARTITIONS = 400
# A small run (a few hundred instances) spends most of its time starting the JVM and warming it
# up. Up to SMALL_RUN_ROWS rows, a run gets SMALL_RUN_PARTITIONS shuffle partitions and no
# whole-stage code generation (compiling each stage's Java costs more than it saves on so few
# rows); a short-lived process (one `analyze`, then exit) also starts its JVM with C1 only and the
# serial GC. C1-only code is slower at steady state, so never a session that outlives one run
# (docs/spark.md, "Small runs"). The code path is the same as for any other run.
SMALL_RUN_ROWS = 400_000  # about 10,000 instances of 40 keys
SMALL_RUN_PARTITIONS = 2
SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The driver's RPC and block-manager ports are unauthenticated unless spark.authenticate is on, and the driver
# holds every cluster's client configs: it listens on loopback unless the fleet file names a reachable address
# (`spark_driver_host`, for a remote master; docs/spark.md, "Where the driver listens").
LOOPBACK = "127.0.0.1"
# s3a:// needs hadoop-aws (of pyspark's Hadoop) and the AWS SDK v2 bundle on the driver's and executors' classpath:
# `make s3a-jars` puts them in .cache/s3a (deploy/spark-s3a/pom.xml); elsewhere $FLEETVIEW_S3A_JARS names a directory
# of jars (or a classpath) that exists on the driver and on every worker (docs/deploy.md).
S3A_JARS_ENV = "FLEETVIEW_S3A_JARS"
REPO_S3A_JARS = Path(__file__).resolve().parents[2] / ".cache" / "s3a"
# The AWS SDK's own chain: environment, web identity (Kubernetes service accounts), AWS_PROFILE, container and
# instance roles. Credentials never go into Spark's configuration, where its UI and logs could show them.
S3A_CREDENTIALS = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"


def s3a_classpath(environ: dict[str, str] | None = None) -> str | None:
    """The classpath entry holding hadoop-aws and the AWS SDK bundle: $FLEETVIEW_S3A_JARS, else .cache/s3a."""
    env = os.environ if environ is None else environ
    given = env.get(S3A_JARS_ENV, "").strip()
    if given:
        return given if (":" in given or given.endswith("*") or given.endswith(".jar")) else f"{given.rstrip('/')}/*"
    if REPO_S3A_JARS.is_dir() and any(REPO_S3A_JARS.glob("hadoop-aws-*.jar")):
        return f"{REPO_S3A_JARS}/*"
    return None


class S3AJarsMissing(ValueError):
    """An s3:// lake, and no hadoop-aws jar where Spark would find it."""


def require_s3a_jars(lake: LakeLocation, environ: dict[str, str] | None = None) -> None:
    """Refuse an s3:// lake clearly when hadoop-aws is nowhere Spark looks (else Spark fails deep in a query with
    ClassNotFoundException: S3AFileSystem)."""
    if not lake.s3 or s3a_classpath(environ) is not None:
        return
    env = os.environ if environ is None else environ
    import pyspark

    homes = [Path(pyspark.__file__).parent, *([Path(env["SPARK_HOME"])] if env.get("SPARK_HOME") else [])]
    if any(any((home / "jars").glob("hadoop-aws-*.jar")) for home in homes):
        return
    raise S3AJarsMissing(f"an s3:// lake is read by Spark through s3a://, which needs hadoop-aws and the AWS SDK "
                         f"bundle: run `make s3a-jars` (they go to .cache/s3a), or set ${S3A_JARS_ENV} to the "
                         "directory that holds them")


def s3a_settings(lake: LakeLocation, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Spark settings for reading and writing an s3:// lake as s3a://: endpoint, addressing, region, committer.

    The endpoint is the URI's endpoint_override, else $AWS_ENDPOINT_URL_S3 / $AWS_ENDPOINT_URL (an S3-compatible store
    on its own address is addressed by path); credentials come from the AWS SDK's default chain on the driver and on
    each executor. Writes through Spark use the S3A magic committer (Hadoop's recommendation for S3).
    """
    if not lake.s3:
        return {}
    env = os.environ if environ is None else environ
    out = {
        "spark.hadoop.fs.s3a.aws.credentials.provider": S3A_CREDENTIALS,
        "spark.hadoop.fs.s3a.committer.name": "magic",
        "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
        "spark.hadoop.fs.s3a.connection.establish.timeout": "10s",
    }
    endpoint = s3_endpoint(lake.endpoint, env)
    region = lake.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if endpoint:
        out["spark.hadoop.fs.s3a.endpoint"] = endpoint
        out["spark.hadoop.fs.s3a.path.style.access"] = "true"
        out["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(urlsplit(endpoint).scheme == "https").lower()
        region = region or "us-east-1"
    if region:
        out["spark.hadoop.fs.s3a.endpoint.region"] = region
    return out


@dataclass(frozen=True)
class SizedSettings:
    """Spark SQL settings chosen for one run from the rows it reads and the cluster's cores (docs/spark.md)."""

    rows: int
    cores: int
    shuffle_partitions: int
    overridden: bool = False
    small: bool = False  # SMALL_RUN_PARTITIONS, and no whole-stage code generation

    @property
    def whole_stage_codegen(self) -> bool:
        """Whole-stage code generation: on, except for a small run."""
        return not self.small


def sized_settings(rows: int, cores: int, override: int | None = None) -> SizedSettings:
    """Shuffle partitions = clamp(rows / ROWS_PER_PARTITION, 2 × cores, MAX_PARTITIONS); SMALL_RUN_PARTITIONS
    for a small run (rows ≤ SMALL_RUN_ROWS)."""
    cores = max(1, cores)
    small = rows <= SMALL_RUN_ROWS
    wanted = math.ceil(max(0, rows) / ROWS_PER_PARTITION)
    partitions = SMALL_RUN_PARTITIONS if small else min(MAX_PARTITIONS, max(2 * cores, wanted))
    return SizedSettings(rows, cores, override or partitions, override is not None, small)


def size_session(spark: SparkSession, rows: int) -> SizedSettings:
    """Apply sized_settings to a session for the coming run, whatever its master; returns what was set.

    Adaptive execution is off: the plan is written out (one shuffle of the latest rows into sized
    partitions, broadcasts named by hints), and with it on, Spark runs every shuffle stage as a job
    of its own and re-plans between them. ``$FLEETVIEW_SPARK_SHUFFLE_PARTITIONS`` overrides the
    partition count.
    """
    raw = os.environ.get(PARTITIONS_ENV, "").strip()
    sized = sized_settings(rows, spark.sparkContext.defaultParallelism,
                           int(raw) if raw.isdigit() and int(raw) > 0 else None)
    for key, value in (
        ("spark.sql.shuffle.partitions", sized.shuffle_partitions),
        ("spark.sql.codegen.wholeStage", str(sized.whole_stage_codegen).lower()),
        ("spark.sql.adaptive.enabled", "false"),
        ("spark.sql.autoBroadcastJoinThreshold", "-1"),  # only the hinted (driver-made) tables are broadcast
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
              short_lived: bool = False, driver_host: str | None = None, lake: str | None = None) -> SparkSession:
    """Build (or reuse) the SparkSession: quiet logs, UTC, few shuffle partitions when local.

    ``short_lived``: this process runs one small job and exits; a JVM this call starts gets
    SHORT_RUN_JAVA_OPTIONS. A session that already runs keeps its JVM as it is.
    ``driver_host``: the address the driver binds and advertises (default: 127.0.0.1, see driver_address).
    ``lake``: an s3:// lake adds the s3a settings and the jars that read it (s3a_settings, s3a_classpath).
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if lake:
        require_s3a_jars(parse_lake(lake))
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
    where = parse_lake(lake) if lake else None
    settings = s3a_settings(where) if where is not None else {}
    for key, value in settings.items():
        builder = builder.config(key, value)
    classpath = s3a_classpath()
    if classpath:  # whatever the lake: a session outlives one lake (tests, a later s3:// run in the same process)
        builder = (builder.config("spark.driver.extraClassPath", classpath)
                   .config("spark.executor.extraClassPath", classpath))
    if resolved is not None and resolved.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "4").config(
            "spark.default.parallelism", "4"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if settings:
        # A context that already ran keeps the Hadoop settings it started with: set them on it (every DataFrame and
        # RDD job takes its Hadoop configuration from there, to the driver and the executors).
        hadoop = session.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        for key, value in settings.items():
            hadoop.set(key.removeprefix("spark.hadoop."), value)
    return session
