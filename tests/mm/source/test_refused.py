"""Which failed mirror queries end the flow at once: the pure decision."""

from __future__ import annotations

import pytest

from mm.source.refused import refusal_message

pytestmark = pytest.mark.unit


def test_a_refused_fetch_ends_the_flow_naming_operation_resource_and_cluster() -> None:
    cause = (
        "mm_client.errors.KafkaOperationError: fetch orders[0] on cluster A (reader group "
        "__mm.mirror.A.B): Group authorization failed (code=GROUP_AUTHORIZATION_FAILED)"
    )
    assert refusal_message("A->B", cause) == (
        "flow A->B stopped, refused by the cluster: fetch orders[0] on cluster A (reader "
        "group __mm.mirror.A.B): Group authorization failed "
        "(code=GROUP_AUTHORIZATION_FAILED). Grant the principal of that cluster's client "
        "the right it names (docs/security.md lists each job's ACLs), then run again"
    )


@pytest.mark.parametrize(
    "code",
    [
        "GROUP_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "SASL_AUTHENTICATION_FAILED",
        "_AUTHENTICATION",
    ],
)
def test_every_refusal_code_ends_the_flow(code: str) -> None:
    message = refusal_message("A->B", f"produce to A.t[0] on cluster B: refused (code={code})")
    assert message is not None and message.startswith(
        f"flow A->B stopped, refused by the cluster: produce to A.t[0] on cluster B: "
        f"refused (code={code})."
    )


@pytest.mark.parametrize(
    "cause",
    [
        "mm_client.errors.KafkaOperationError: fetch t[0] on A: timed out (code=_TIMED_OUT)",
        "produce to A.t[0] on cluster B failed: Local: Purged in queue (code=_PURGE_QUEUE)",
        "An exception was raised by the Python Proxy. Return Message: Traceback",
        # a code named mid-line is not the error's own
        "x (code=TOPIC_AUTHORIZATION_FAILED) then the real error: timed out",
        "",
    ],
)
def test_other_failures_are_restarted(cause: str) -> None:
    assert refusal_message("A->B", cause) is None
