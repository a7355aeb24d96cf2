"""Apache Kafka 4.3.1's jars (broker, tools, MirrorMaker 2) for local clusters.

They come from Maven Central, named by ``kafka-pom.xml`` (next to this module),
copied once with Maven into ``${XDG_CACHE_HOME:-~/.cache}/mm/kafka-4.3.1/``
(`mm embedded fetch-kafka`; ``./dev`` runs it). ``$MM_KAFKA_JARS`` names another
directory holding the same jars, used as it is. The copy carries the pom's
sha256 in ``.pom.sha256``: a changed pom is fetched again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

from mm.errors import MirrorError

KAFKA_VERSION: Final = "4.3.1"
ENV_JARS: Final = "MM_KAFKA_JARS"
# one jar of each artifact the product starts (broker, storage tool, MM2, Connect)
REQUIRED: Final = ("kafka_2.13", "kafka-tools", "connect-mirror", "connect-runtime")
_STAMP: Final = ".pom.sha256"


def pom_path() -> Path:
    return Path(__file__).with_name("kafka-pom.xml")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mm" / f"kafka-{KAFKA_VERSION}"


def missing_jars(path: Path) -> list[str]:
    """The required jar files ``path`` does not hold (all of them when it is no directory)."""
    return [
        f"{name}-{KAFKA_VERSION}.jar"
        for name in REQUIRED
        if not (path / f"{name}-{KAFKA_VERSION}.jar").is_file()
    ]


def _pom_digest() -> str:
    return hashlib.sha256(pom_path().read_bytes()).hexdigest()


def _cache_current(path: Path) -> bool:
    try:
        stamp = (path / _STAMP).read_text().strip()
    except OSError:
        return False
    return stamp == _pom_digest() and not missing_jars(path)


def find_jars() -> Path | None:
    """The jars' directory: ``$MM_KAFKA_JARS`` when set, else the cache when it is
    filled for this pom; None when neither holds them. A set ``$MM_KAFKA_JARS``
    without them is an error (the user meant it), never passed over."""
    given = os.environ.get(ENV_JARS)
    if given:
        path = Path(given)
        missing = missing_jars(path)
        if missing:
            raise MirrorError(
                f"{ENV_JARS}={given} does not hold Apache Kafka {KAFKA_VERSION}'s jars "
                f"({', '.join(missing)} missing); expected a directory filled by "
                "`mm embedded fetch-kafka --dir DIR`, or unset it to use "
                f"{cache_dir()}"
            )
        return path
    cached = cache_dir()
    return cached if _cache_current(cached) else None


def require_jars() -> Path:
    """:func:`find_jars`, or a MirrorError saying how to get them."""
    found = find_jars()
    if found is None:
        raise MirrorError(
            f"Apache Kafka {KAFKA_VERSION}'s jars are not in {cache_dir()}: run "
            "`mm embedded fetch-kafka` once (Maven and Maven Central needed), or set "
            f"{ENV_JARS} to a directory holding them"
        )
    return found


def fetch_jars(dest: Path | None = None) -> Path:
    """Copy the pom's runtime dependencies into ``dest`` (the cache by default) with
    Maven, unless they are there for this pom already; returns the directory."""
    dest = dest or cache_dir()
    if _cache_current(dest):
        return dest
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MirrorError(
            f"Maven ('mvn') is needed to fetch Apache Kafka {KAFKA_VERSION}'s jars but is "
            "not on PATH: install Maven 3.8+ (e.g. `apt-get install maven`), or set "
            f"{ENV_JARS} to a directory holding the jars of {pom_path()}"
        )
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    log = dest / ".mvn.log"
    with log.open("w") as out:
        done = subprocess.run(
            [
                *(mvn, "-B", "-q", "-f", str(pom_path()), "dependency:copy-dependencies"),
                *(f"-DoutputDirectory={dest}", "-DincludeScope=runtime"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    missing = missing_jars(dest)
    if done.returncode != 0 or missing:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise MirrorError(
            f"Maven could not copy Apache Kafka {KAFKA_VERSION}'s jars into {dest} "
            f"(exit {done.returncode}{'; missing ' + ', '.join(missing) if missing else ''}; "
            f"is Maven Central reachable?):\n{tail}"
        )
    (dest / _STAMP).write_text(_pom_digest() + "\n")
    return dest
