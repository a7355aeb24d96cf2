"""KRaft storage formatted once per process and argument set, then copied.

``kafka-storage format`` is a JVM of its own: about 1.2 s and 1.2 CPU seconds on
2 cores, before every new broker of the drill, the demo and the tests. What it
writes into a one-node cluster's single log directory is two small files:
``meta.properties`` (version, cluster.id, node.id, directory.id) and
``bootstrap.checkpoint`` (the metadata version's feature records and the SCRAM
credentials given as arguments), neither of which names the cluster id or the
directory. So the first format with a given set of arguments and node id is kept
in a template directory of this process, and every later one copies it and writes
a ``meta.properties`` with a new cluster id and a new directory id: the storage a
format with a new cluster id gives, without the JVM. A configuration with more than
one log directory, or a separate metadata log directory, is formatted as before.

The template lives in a temporary directory removed when the process exits (SCRAM
credentials in it are salted hashes of the arguments' passwords, never kept on disk
beyond the process).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from mm.config.properties import load_properties

META = "meta.properties"
BOOTSTRAP = "bootstrap.checkpoint"

_lock = threading.Lock()
_templates: dict[tuple[str, ...], Path] = {}
_root: Path | None = None


def single_log_dir(props: Mapping[str, str]) -> Path | None:
    """The one log directory of a configuration, or None when it has several or a
    separate metadata log directory (those are formatted by the tool)."""
    dirs = props.get("log.dirs") or props.get("log.dir") or ""
    if "," in dirs or not dirs or props.get("metadata.log.dir"):
        return None
    return Path(dirs)


def meta_properties(cluster_id: str, node_id: str, directory_id: str) -> str:
    return f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={directory_id}\n"


def _template_root() -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="mm-kraft-format-"))
        atexit.register(shutil.rmtree, _root, True)
    return _root


def format_from_template(
    config: Path,
    args: tuple[str, ...],
    cluster_id: str,
    new_id: Callable[[], str],
    run_format: Callable[[str], None],
) -> None:
    """Storage for ``config`` as ``kafka-storage format -t cluster_id -c config args``
    would leave it. ``run_format(cluster_id)`` runs the tool (the first time for these
    arguments, or for a configuration the template cannot serve); ``new_id`` gives a
    directory id."""
    props = load_properties(config)
    data = single_log_dir(props)
    if data is None or (data.exists() and any(data.iterdir())):
        run_format(cluster_id)  # the tool says what is wrong with a used directory
        return
    key = (props.get("node.id", ""), *args)
    with _lock:
        template = _templates.get(key)
        if template is None:
            run_format(cluster_id)
            if sorted(p.name for p in data.iterdir()) != sorted((BOOTSTRAP, META)):
                return  # not what this module knows the tool writes: no template
            template = Path(tempfile.mkdtemp(dir=_template_root()))
            shutil.copytree(data, template, dirs_exist_ok=True)
            _templates[key] = template
            return
    data.mkdir(parents=True, exist_ok=True)
    shutil.copy2(template / BOOTSTRAP, data / BOOTSTRAP)
    (data / META).write_text(meta_properties(cluster_id, key[0], new_id()))
