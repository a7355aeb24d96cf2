"""What an operator reads when a Spark job fails: the Python worker's own error
line, not py4j's first line nor the JVM's stack.

A Python exception raised in a Spark task reaches the driver wrapped in a py4j or
pyspark exception whose text holds the worker's whole traceback; its last
``<module.Class>: <message>`` line from mm (or a Kafka client) is what happened.
"""

from __future__ import annotations

import re
from typing import Any

# "mm_client.errors.KafkaOperationError: " and the like, in front of the message
_CLASS_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


def worker_error_line(exc: Any) -> str:
    """The worker's error line in ``exc``'s text (its first line when there is none)."""
    text = str(exc)
    for line in reversed(text.splitlines()):
        if ("Error:" in line or "Exception:" in line) and (
            "mm." in line or "Kafka" in line or "Mirror" in line
        ):
            return line.strip()
    return text.splitlines()[0] if text.strip() else repr(exc)


def without_class(line: str) -> str:
    """``line`` without its leading exception class name."""
    return _CLASS_PREFIX.sub("", line, count=1)


# Spark loggers that print a failed task's Python traceback and Java stack (each
# failure three times over: the executor, the task set, the streaming query); mm
# reports the failure itself, in one line
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
)


def quiet_task_failures(spark: Any) -> None:
    """Turn the :data:`TASK_FAILURE_LOGGERS` off in ``spark``'s JVM (best effort), and
    py4j's report of a failed streaming batch handler (the failed task's traceback
    once more: the query's exception carries it to mm)."""
    import logging

    logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
    try:
        jvm = spark.sparkContext._jvm
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in TASK_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
    except Exception:  # an older log4j, a gateway gone: Spark's traces stay, no harm
        pass
