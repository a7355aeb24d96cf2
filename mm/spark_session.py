"""Builds the SparkSession every job uses.

``spark.master`` defaults to ``local[*]``; every ``spark.*`` key of the config is
applied as given. Python workers are pinned to this interpreter so executors use
the same environment as the driver (``PYSPARK_PYTHON``), through the
``mm-spark-python`` launcher installed next to it (see :mod:`mm.spark_python`:
same interpreter, PySpark imported byte-compiled) unless ``PYSPARK_PYTHON`` names
another interpreter.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULTS: dict[str, str] = {
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # the mirror's rows are tiny summaries; Arrow adds start-up cost for nothing
    "spark.sql.execution.arrow.pyspark.enabled": "false",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    "spark.driver.memory": "1g",
    # The JVM only orchestrates (records stay in the Python workers), so the
    # optimising C2 compiler buys nothing: it was ~0.5 core-seconds of JIT work
    # per large micro-batch, taken from the workers and brokers on small hosts.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    # Spark's worker daemon, minus the traceback of a worker whose task a stop
    # interrupted (see mm.spark_daemon)
    "spark.python.daemon.module": "mm.spark_daemon",
}


def require_java() -> str:
    """Path of the java binary Spark will use, or a clear error when there is none."""
    from mm.errors import MirrorError

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise MirrorError(
            "Java 17 or newer is required to run Spark but no java was found "
            f"({'JAVA_HOME=' + home if home else 'not on PATH'}); install a JDK 17+ "
            "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    return java


def spark_python(configured: str | None = None) -> str:
    """The executable Spark starts Python processes with.

    ``configured`` (``PYSPARK_PYTHON``) wins unless it is this interpreter, in
    which case the launcher next to it is used when installed (same interpreter)."""
    if configured and os.path.abspath(configured) != os.path.abspath(sys.executable):
        return configured
    launcher = os.path.join(os.path.dirname(sys.executable), "mm-spark-python")
    return launcher if os.access(launcher, os.X_OK) else sys.executable


def build_spark(
    app_name: str, spark_conf: Mapping[str, str], class_archive: str = "auto"
) -> SparkSession:
    """The SparkSession, its driver JVM started from a class archive where one is
    ready (``class_archive``: the ``mm.spark.class.archive`` setting)."""
    java = require_java()
    os.environ["PYSPARK_PYTHON"] = spark_python(os.environ.get("PYSPARK_PYTHON"))
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from mm.spark_classes import java_options, set_aside, with_java_options

    conf = {**DEFAULTS, **dict(spark_conf)}
    archive = None
    if SparkContext._gateway is None:  # the options apply to a JVM not yet started
        options, archive = java_options(class_archive, conf, java)
        conf = with_java_options(conf, options)

    def session(conf: Mapping[str, str]) -> SparkSession:
        builder = SparkSession.builder.appName(app_name)
        for key, value in conf.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()

    try:
        spark = session(conf)
    except Exception:
        if archive is None:
            raise
        # a JVM that cannot start from the archive starts without it, once
        set_aside(archive)
        spark = session({**DEFAULTS, **dict(spark_conf)})
    spark.sparkContext.setLogLevel(os.environ.get("MM_SPARK_LOG_LEVEL", "WARN"))
    if "MM_SPARK_LOG_LEVEL" not in os.environ:
        from mm.spark_errors import quiet_task_failures

        quiet_task_failures(spark)  # mm reports a failed task in one line
    from mm.spark_daemon import quiet_accumulator_server

    quiet_accumulator_server(getattr(spark.sparkContext, "_accumulatorServer", None))
    return spark
