"""spark-submit entry point for the mirror.

    spark-submit [--master URL] [--conf k=v ...] spark_jobs/mirror.py \\
        -c connect-mirror-maker.properties [--once] [--flow SRC->TGT ...]

Same arguments, code and exit codes as `mm mirror`. The cluster's Python
workers need the project installed and ``PYSPARK_PYTHON`` naming that
interpreter or, better, its ``mm-spark-python`` launcher (see mm.spark_python;
``--conf spark.pyspark.python=...`` or the environment).

Precedence of Spark settings: ``spark.*`` keys of the properties file, then
spark-submit's ``--master``/``--conf``, then mm's built-in defaults (which
alone would run ``local[*]`` whatever ``--master`` said).
"""

from __future__ import annotations

import os
import sys

from mm.cli import main


def respect_spark_submit() -> list[str]:
    """Under spark-submit, drop mm's Spark defaults that the submission already set.

    spark-submit starts the JVM first (with ``--master`` and ``--conf`` as system
    properties) and hands its gateway to this process; ``mm.spark_session``'s
    defaults would otherwise be applied over them. Returns the keys dropped.
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return []  # not under spark-submit: nothing was submitted
    from pyspark import SparkConf, SparkContext

    from mm import spark_session

    SparkContext._ensure_initialized()  # connect to spark-submit's JVM (no context yet)
    submitted = SparkConf()  # that JVM's spark.* system properties
    dropped = [k for k in spark_session.DEFAULTS if submitted.contains(k)]
    for key in dropped:
        del spark_session.DEFAULTS[key]
    return dropped


if __name__ == "__main__":
    respect_spark_submit()
    sys.exit(main(["mirror", *sys.argv[1:]]))
