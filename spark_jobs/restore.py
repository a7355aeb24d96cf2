"""spark-submit entry point for `mm restore`.

    spark-submit [--master URL] [--conf k=v ...] spark_jobs/restore.py \\
        -c connect-mirror-maker.properties --to B [--until TIME] [--json]

Same arguments, code and exit codes as `mm restore`; Spark settings follow the
same precedence as the mirror's entry point (see ``spark_jobs/mirror.py``).
"""

from __future__ import annotations

import sys

from mm.cli import main

if __name__ == "__main__":
    from spark_jobs.mirror import respect_spark_submit

    respect_spark_submit()
    sys.exit(main(["restore", *sys.argv[1:]]))
