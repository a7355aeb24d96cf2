"""Why a cluster did not answer, in words an application engineer can act on.

librdkafka says why it cannot connect in its log lines (``FAIL ... Connect to
ipv4#10.0.0.1:9092 failed: Connection refused``), not in the timeout it finally
raises (``Local: Broker transport failure``). :func:`diagnose` reads the lines a
client logged and names the cause: a host that does not resolve (DNS), nothing
listening at the address, a TLS handshake or certificate problem, a SASL
authentication refusal, or a listener that hung up on the first request (a
``security.protocol`` that does not match the listener). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["diagnose"]

# (pattern over one log line, explanation); the first kind found wins, in this order:
# a DNS failure explains a refused connection to nothing, a TLS failure a hang-up
_CAUSES: Final = (
    (
        re.compile(r"Failed to resolve '([^']+)'"),
        "DNS: the host of {0} does not resolve (check the name and the DNS this machine uses)",
    ),
    (
        re.compile(r"SSL handshake failed: (.*?)(?: \(after \d+ms in state \w+\))?$"),
        "TLS: the handshake failed ({0}); check security.protocol (SSL or SASL_SSL "
        "for a TLS listener), ssl.ca.location and the broker's certificate",
    ),
    (
        re.compile(r"SASL authentication error: (.*?)(?: \(after \d+ms in state \w+\))?$"),
        "SASL: the broker refused the credentials ({0}); check sasl.mechanism, "
        "sasl.username and sasl.password",
    ),
    (
        re.compile(r"Connect to (?:ipv[46]#)?(\S+) failed: Connection refused"),
        "nothing accepts connections at {0}: the broker is down or the port is wrong",
    ),
    (
        re.compile(r"Connect to (?:ipv[46]#)?(\S+) failed: (?:Connection timed out|No route)"),
        "no answer from {0}: a firewall, a security group or the wrong network",
    ),
    (
        re.compile(r"Disconnected.*in state APIVERSION_QUERY"),
        "the broker closed the connection on the first request: security.protocol "
        "probably does not match the listener (PLAINTEXT or SASL_PLAINTEXT to a TLS "
        "port?)",
    ),
)


def diagnose(lines: Iterable[str]) -> str | None:
    """The cause named by librdkafka's log ``lines``, or None when they name none."""
    seen = list(lines)
    for pattern, explanation in _CAUSES:
        for line in reversed(seen):
            found = pattern.search(line)
            if found:
                detail = (found.group(1) if found.groups() else "").strip() or "no detail"
                return explanation.format(detail)
    return None
