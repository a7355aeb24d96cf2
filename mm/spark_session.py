"""Builds the SparkSession every job uses.

``spark.master`` defaults to ``local[*]``; every ``spark.*`` key of the config is
applied as given. Python workers are pinned to this interpreter so executors use
the same environment as the driver (``PYSPARK_PYTHON``).
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


def build_spark(app_name: str, spark_conf: Mapping[str, str]) -> SparkSession:
    require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in {**DEFAULTS, **dict(spark_conf)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("MM_SPARK_LOG_LEVEL", "WARN"))
    return spark
