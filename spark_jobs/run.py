"""spark-submit entry point for `mm run` (mirror, checkpoint and heartbeat of every
enabled flow in one Spark application).

    spark-submit [--master URL] [--conf k=v ...] spark_jobs/run.py \\
        -c connect-mirror-maker.properties [--flow SRC->TGT ...] [--jobs mirror,checkpoint]

Same arguments, code and exit codes as `mm run`; see spark_jobs/mirror.py for the
Python workers and the precedence of Spark settings.
"""

from __future__ import annotations

import sys

from mm.cli import main

if __name__ == "__main__":
    from spark_jobs.mirror import respect_spark_submit

    respect_spark_submit()
    sys.exit(main(["run", *sys.argv[1:]]))
