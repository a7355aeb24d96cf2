"""A one-node Apache Kafka with the listeners production uses, and an authorizer.

:class:`SecureKRaftBroker` is a :class:`~support.apache_kafka.KRaftBroker` with
five client listeners, each on a free port of 127.0.0.1:

=================  ==============  ============================================
listener           protocol        who connects, as which principal
=================  ==============  ============================================
``PLAINTEXT``      PLAINTEXT       the operator (``User:ANONYMOUS``, a super user:
                                   the KRaft controller's own connections arrive
                                   as ANONYMOUS too)
``SSL``            SSL             TLS, no client certificate (ANONYMOUS)
``MTLS``           SSL             mutual TLS: the client certificate's CN is the
                                   principal (``CN=alice`` -> ``User:alice``)
``SASL_SSL``       SASL_SSL        PLAIN, SCRAM-SHA-256/512 or OAUTHBEARER users,
                                   over TLS
``SASL_PLAINTEXT`` SASL_PLAINTEXT  the same mechanisms, no TLS
=================  ==============  ============================================

Users (SCRAM-SHA-256 and -512 credentials stored at format time, PLAIN in the
listener's JAAS; OAUTHBEARER takes Apache Kafka's unsecured tokens, whose ``sub``
claim is the principal: the test stand-in for an identity provider): ``admin``
is a super user; every other user in :data:`USERS` is an ordinary principal
that may do only what ACLs grant it (StandardAuthorizer,
``allow.everyone.if.no.acl.found=false``). TLS material is made with ``openssl``:
one CA, a server certificate for ``127.0.0.1``/``localhost``, and a client
certificate per user (for MTLS), all PEM (the broker reads PEM key and trust
stores); :meth:`SecureKRaftBroker.mm2` can also hand the client key and
certificate over as a password-protected PKCS12 key store.

:meth:`SecureKRaftBroker.client` gives confluent-kafka settings for a listener and
user; :meth:`SecureKRaftBroker.mm2` gives the same as MM2-spelt cluster settings
(``<alias>.security.protocol``, ``sasl.jaas.config``, PEM trust store ...): what a
user writes in ``connect-mirror-maker.properties``.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mm.embedded import procs
from support.apache_kafka import KRaftBroker

USERS = ("admin", "mm", "app")
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")
PROTOCOL = {
    "PLAINTEXT": "PLAINTEXT",
    "SSL": "SSL",
    "MTLS": "SSL",
    "SASL_SSL": "SASL_SSL",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
}
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA, the broker's key+certificate, one key+certificate per user."""

    ca: Path
    server_keystore: Path
    client_certs: dict[str, Path]
    client_keys: dict[str, Path]


def _openssl(*args: str, cwd: Path) -> None:
    out = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")


def _signed(cwd: Path, name: str, subject: str, extensions: str | None = None) -> None:
    """``<name>.key`` (PKCS#8, unencrypted) and ``<name>.pem`` signed by ``ca``."""
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
        "-out", f"{name}.csr", "-subj", subject, cwd=cwd,
    )  # fmt: skip
    args = ["-extfile", f"{name}.ext"] if extensions else []
    if extensions:
        (cwd / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "3650", "-out", f"{name}.pem", *args, cwd=cwd,
    )  # fmt: skip


def make_tls(directory: Path, users: tuple[str, ...] = USERS) -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate per user."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
        "-out", "ca.pem", "-days", "3650", "-subj", "/CN=mm-test-ca", cwd=directory,
    )  # fmt: skip
    _signed(directory, "server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    keystore = directory / "server-keystore.pem"
    keystore.write_text(
        (directory / "server.key").read_text() + (directory / "server.pem").read_text()
    )
    for user in users:
        _signed(directory, f"client-{user}", f"/O=mm-test/CN={user}")
    return TlsFiles(
        ca=directory / "ca.pem",
        server_keystore=keystore,
        client_certs={u: directory / f"client-{u}.pem" for u in users},
        client_keys={u: directory / f"client-{u}.key" for u in users},
    )


class SecureKRaftBroker(KRaftBroker):
    """A one-node Apache Kafka cluster with TLS, mutual-TLS and SASL listeners, SCRAM
    and PLAIN users and an authorizer (see the module docstring)."""

    def __init__(self, workdir: Path, *, wait: bool = True, timeout: float = 90.0) -> None:
        self.tls = make_tls(workdir / "tls")
        self.passwords = {user: secrets.token_hex(12) for user in USERS}
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.passwords.items())
        extra: dict[str, object] = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.tls.server_keystore,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.tls.ca,
            "ssl.client.auth": "none",
            "listener.name.mtls.ssl.client.auth": "required",
            # the DN as Java prints it (RFC 2253: CN=alice,O=mm-test) -> User:alice
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin",
            "allow.everyone.if.no.acl.found": "false",
        }
        for name in ("sasl_ssl", "sasl_plaintext"):
            extra[f"listener.name.{name}.plain.sasl.jaas.config"] = (
                f"{PLAIN_MODULE} required {plain_users};"
            )
            for scram in ("scram-sha-256", "scram-sha-512"):
                extra[f"listener.name.{name}.{scram}.sasl.jaas.config"] = (
                    f"{SCRAM_MODULE} required;"
                )
            # no callback handler configured: Kafka validates unsecured tokens
            extra[f"listener.name.{name}.oauthbearer.sasl.jaas.config"] = (
                f"{OAUTH_MODULE} required;"
            )
        format_args: list[str] = []
        for user, password in self.passwords.items():
            for scram in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                format_args += ["--add-scram", f"{scram}=[name={user},password={password}]"]
        super().__init__(workdir, extra=extra, format_args=format_args, wait=wait, timeout=timeout)

    def _listener_props(self) -> dict[str, object]:
        """Every listener of the table above; PLAINTEXT is :attr:`port` (the probe's)."""
        taken = {self.port, self.controller_port}
        self.ports = {"PLAINTEXT": self.port}
        for name in LISTENERS[1:]:
            port = procs.free_port()
            while port in taken:
                port = procs.free_port()
            taken.add(port)
            self.ports[name] = port
        advertised = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        return {
            "listeners": f"{advertised},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": advertised,
            "listener.security.protocol.map": ",".join(
                [*(f"{n}:{PROTOCOL[n]}" for n in LISTENERS), "CONTROLLER:PLAINTEXT"]
            ),
        }

    def bootstrap_of(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(
        self, listener: str, user: str = "admin", mechanism: str = "SCRAM-SHA-512"
    ) -> dict[str, str]:
        """confluent-kafka settings to reach ``listener`` as ``user``."""
        conf = {
            "bootstrap.servers": self.bootstrap_of(listener),
            "security.protocol": PROTOCOL[listener],
        }
        if PROTOCOL[listener] in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(self.tls.ca)
        if listener == "MTLS":
            conf["ssl.certificate.location"] = str(self.tls.client_certs[user])
            conf["ssl.key.location"] = str(self.tls.client_keys[user])
        if listener.startswith("SASL") and mechanism == "OAUTHBEARER":
            conf |= {
                "sasl.mechanism": mechanism,
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": f"principal={user}",
            }
        elif listener.startswith("SASL"):
            conf |= {
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": self.passwords[user],
            }
        return conf

    def mm2(
        self,
        alias: str,
        listener: str,
        user: str = "admin",
        mechanism: str = "SCRAM-SHA-512",
        keystore: str = "PEM",
    ) -> dict[str, str]:
        """MM2-spelt settings of cluster ``alias`` reaching ``listener`` as ``user``
        (the Java client's keys, as in ``connect-mirror-maker.properties``); over MTLS
        the client's key store is ``keystore``: ``PEM`` or ``PKCS12``."""
        props = {
            f"{alias}.bootstrap.servers": self.bootstrap_of(listener),
            f"{alias}.security.protocol": PROTOCOL[listener],
        }
        if PROTOCOL[listener] in ("SSL", "SASL_SSL"):
            props |= {
                f"{alias}.ssl.truststore.type": "PEM",
                f"{alias}.ssl.truststore.location": str(self.tls.ca),
            }
        if listener == "MTLS" and keystore == "PKCS12":
            path, password = self._client_pkcs12(user)
            props |= {
                f"{alias}.ssl.keystore.type": "PKCS12",
                f"{alias}.ssl.keystore.location": str(path),
                f"{alias}.ssl.keystore.password": password,
            }
        elif listener == "MTLS":
            props |= {
                f"{alias}.ssl.keystore.type": "PEM",
                f"{alias}.ssl.keystore.location": str(self._client_keystore(user)),
            }
        if listener.startswith("SASL") and mechanism == "OAUTHBEARER":
            props |= {
                f"{alias}.sasl.mechanism": mechanism,
                f"{alias}.sasl.jaas.config": (
                    f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{user}";'
                ),
            }
        elif listener.startswith("SASL"):
            module = SCRAM_MODULE if mechanism.startswith("SCRAM") else PLAIN_MODULE
            props |= {
                f"{alias}.sasl.mechanism": mechanism,
                f"{alias}.sasl.jaas.config": (
                    f'{module} required username="{user}" password="{self.passwords[user]}";'
                ),
            }
        return props

    def _client_pkcs12(self, user: str) -> tuple[Path, str]:
        """The user's key and certificate in a password-protected PKCS12 key store;
        its password is in :attr:`passwords` as ``<user>.p12``."""
        path = self.tls.client_certs[user].with_suffix(".p12")
        password = self.passwords.setdefault(f"{user}.p12", secrets.token_hex(12))
        if not path.exists():
            _openssl(
                "pkcs12", "-export", "-in", str(self.tls.client_certs[user]),
                "-inkey", str(self.tls.client_keys[user]), "-out", str(path),
                "-passout", f"pass:{password}", cwd=path.parent,
            )  # fmt: skip
        return path, password

    def _client_keystore(self, user: str) -> Path:
        """The user's key and certificate in one PEM file (a Java PEM key store)."""
        path = self.tls.client_certs[user].with_suffix(".keystore.pem")
        if not path.exists():
            path.write_text(
                self.tls.client_keys[user].read_text() + self.tls.client_certs[user].read_text()
            )
        return path
