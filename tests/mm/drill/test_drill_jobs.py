"""What the drill says of a job that ended under it (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.drill.jobs import ended_job_says

pytestmark = pytest.mark.unit

LOG = Path("/run/logs/mirror.log")


def test_an_ended_job_is_told_by_its_error_line_alone() -> None:
    output = "\n".join(
        [
            '{"event": "created target topic", "level": "info"}',
            "26/11/28 20:34:42 WARN Utils: Your hostname resolves to a loopback address",
            "mm mirror: error: an earlier attempt",
            "mm mirror: error: flow A->B stopped, refused by the cluster: init transactions "
            "(code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)",
            "",
        ]
    )
    said = ended_job_says("mirror", output, LOG)
    assert said == (
        "flow A->B stopped, refused by the cluster: init transactions "
        "(code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED) (its output: /run/logs/mirror.log)"
    )


def test_an_ended_job_without_an_error_line_is_told_by_its_output_tail() -> None:
    output = "x" * 5000 + "Killed\n"
    said = ended_job_says("checkpoint", output, LOG)
    assert said == output[-3000:] + " (its output: /run/logs/mirror.log)"
    # another job's error line is not this job's
    other = "mm mirror: error: refused\nSegmentation fault\n"
    assert ended_job_says("checkpoint", other, LOG).startswith("mm mirror: error: refused")
