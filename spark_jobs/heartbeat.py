"""Entry point for the heartbeat job, beside the Spark jobs' ones.

    python spark_jobs/heartbeat.py -c connect-mirror-maker.properties [--once] [--flow SRC->TGT]

The heartbeat job is a plain producer loop (one record per flow per interval
needs no Spark): same arguments, code and exit codes as `mm heartbeat`. It may
also be launched with spark-submit, which then only runs it on the driver.
"""

from __future__ import annotations

import sys

from mm.cli import main

if __name__ == "__main__":
    sys.exit(main(["heartbeat", *sys.argv[1:]]))
