"""One Python function over a list of small task descriptions, one Spark task each.

The batch jobs of backups (a pass, a compaction, a restore) all run this way: the
driver plans per-partition tasks, Spark only schedules them, and each task moves
its partition's records inside the Python worker (records never enter the JVM);
only small summaries come back. A task reports its own errors in its summary; what
reaches here is Spark itself failing (a worker died, the JVM went away), which is
one line naming it, never a JVM stack trace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mm.config import MirrorConfig
from mm.errors import MirrorError
from mm.spark_errors import without_class, worker_error_line

T = TypeVar("T")
R = TypeVar("R")


def run_python_tasks(
    cfg: MirrorConfig,
    app_name: str,
    fn: Callable[[T], R],
    tasks: Sequence[T],
    spark_factory: Callable[[], Any] | None,
    after_failure: str,
) -> list[R]:
    """``fn`` over ``tasks`` in as many Spark tasks, results in task order.

    Uses ``spark_factory``'s session (left running) or builds one from ``cfg`` (stopped
    after). ``after_failure`` tells the user what a Spark failure leaves behind.
    """
    if not tasks:
        return []
    if spark_factory is not None:
        spark = spark_factory()
    else:
        from mm.spark_session import build_spark

        spark = build_spark(app_name, cfg.spark, cfg.setting("spark.class.archive"))
    try:
        return map_tasks(spark, fn, tasks)
    except MirrorError:
        raise
    except Exception as exc:
        line = without_class(worker_error_line(exc))
        raise MirrorError(f"the Spark job failed: {line}; {after_failure}") from exc
    finally:
        if spark_factory is None:
            spark.stop()


def map_tasks(spark: Any, fn: Callable[[T], R], tasks: Sequence[T]) -> list[R]:
    """``fn`` over ``tasks`` on ``spark``, one task each, results in task order."""
    result: list[R] = spark.sparkContext.parallelize(list(tasks), len(tasks)).map(fn).collect()
    return result
