"""A mirror query's failure that no restart can cure: the cluster refused the
principal (an ACL missing, credentials rejected). Pure: the driver passes the
worker error's line, as :func:`mm.spark_errors.worker_error_line` found it."""

from __future__ import annotations

import re

from mm_client.kafka.errors import is_refusal

_CODE = re.compile(r"\(code=([A-Z_]+)\)\s*$")


def refusal_message(flow: str, cause: str) -> str | None:
    """The one line ending a flow its clusters refused (an ACL missing, credentials
    rejected), or None for a failure that a restart may cure. ``cause`` is a worker
    error's last line: ``<class>: <operation, resource and cluster>: <text> (code=...)``."""
    found = _CODE.search(cause)
    if found is None or not is_refusal(found.group(1)):
        return None
    text = cause.split(": ", 1)[1] if cause.split(": ", 1)[0].endswith("Error") else cause
    return (
        f"flow {flow} stopped, refused by the cluster: {text}. Grant the principal of "
        "that cluster's client the right it names (docs/security.md lists each job's "
        "ACLs), then run again"
    )
