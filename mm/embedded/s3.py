"""A local S3 endpoint (moto_server) backing the durable embedded brokers."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mm.embedded import procs
from mm.errors import MirrorError
from mm.logs import get_logger


def _log() -> Any:
    # Looked up per call: mm.logs.get_logger binds eagerly, and these modules are
    # imported before the CLI configures logging.
    return get_logger("mm.embedded.s3")


# Dummy credentials: moto accepts anything, Tansu's S3 client requires them.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "mm-embedded",
    "AWS_SECRET_ACCESS_KEY": "mm-embedded",
    "AWS_DEFAULT_REGION": "eu-west-2",
}


def bucket_for(cluster_name: str) -> str:
    """S3 bucket name for a cluster: lowercase letters, digits and hyphens."""
    slug = re.sub(r"[^a-z0-9-]+", "-", cluster_name.lower()).strip("-") or "x"
    return f"tansu-{slug}"[:63]


class MotoServer:
    """One ``moto.server`` process on a free loopback port; data lives in its memory."""

    def __init__(self, log_path: Path, *, die_with_parent: bool = True) -> None:
        self.log_path = log_path
        self.die_with_parent = die_with_parent
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise MirrorError("moto server is not started")
        return f"http://{procs.LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 30.0, attempts: int = 5) -> None:
        for _ in range(attempts):
            self.port = procs.free_port()
            argv = [sys.executable, "-m", "moto.server", "-H", procs.LOOPBACK, "-p", str(self.port)]
            self.proc = procs.spawn(
                argv, log_path=self.log_path, die_with_parent=self.die_with_parent
            )
            if self._wait_ready(timeout):
                _log().info("moto server started", endpoint=self.endpoint, log=str(self.log_path))
                return
            procs.stop_child(self.proc, grace=1.0)
            if "Address already in use" not in procs.log_tail(self.log_path):
                break
        raise MirrorError(
            f"moto server did not start (log {self.log_path}):\n{procs.log_tail(self.log_path)}"
        )

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return True
            except urllib.error.HTTPError:
                return True  # any HTTP answer means the server is serving
            except OSError:
                time.sleep(0.1)
        return False

    def create_bucket(self, name: str) -> None:
        import boto3  # slow import, only needed in durable mode

        s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
            region_name=AWS_ENV["AWS_DEFAULT_REGION"],
        )
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if name not in existing:
            s3.create_bucket(
                Bucket=name,
                CreateBucketConfiguration={"LocationConstraint": AWS_ENV["AWS_DEFAULT_REGION"]},
            )

    def tansu_env(self) -> dict[str, str]:
        """Environment that points Tansu's S3 storage engine at this server."""
        return {**AWS_ENV, "AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        if self.proc is not None:
            procs.stop_child(self.proc, grace)
            _log().info("moto server stopped", endpoint=self.endpoint)
            self.proc = None

    def release(self) -> None:
        """Forget the process without stopping it (``mm embedded up --detach``)."""
        self.proc = None
