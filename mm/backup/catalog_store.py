"""Versioned catalog storage: one JSON document per version per partition.

A partition's catalog versions are files in ``PartitionRef.catalog_dir``::

    <prefix>/_catalog/<region>/<topic>/<partition>/v<20-digit version>.json

each ``{"version": n, "writer": <token>, "catalog": {...}}`` (the catalog in
:func:`mm.backup.catalog.catalog_to_dict`'s form). The newest version is the
catalog; older ones are its history (nothing here deletes them). Version 0 is
the empty catalog, which has no file.

A commit names the version it changed (``expected_version``) and creates the next
one only if nobody else did: of two jobs that loaded the same version, one
commits and the other gets :class:`~mm.backup.errors.ConcurrentCommitError`.
The document is first written in full to ``_tmp/<token>.json``, then published:

* **local filesystems**: a hard link from the temporary file to the version's
  name, which fails if the name exists: an atomic create-if-absent, no race;
* **S3 with a conditional put** (``conditional_put``, e.g. :class:`S3ConditionalPut`):
  the document is written straight to the version's name with S3's
  ``If-None-Match: *``, which S3 refuses when the name exists: an atomic
  create-if-absent, no race;
* **other object stores**: ``pyarrow.fs`` offers no create-if-absent. The commit
  checks that the version does not exist, copies the document to it (an object
  appears whole), then reads it back: if the ``writer`` token is another's, a
  later write replaced ours and we lost. The last writer's document stands.
  **Race window**: two writers that both pass the existence check before either
  copy lands can both read back their own document, if the first reads back
  before the second's copy lands: the first then believes it committed while
  the second overwrote it. The window is the time from one writer's existence
  check to the end of its copy; the backup's partition assignment (one job per
  partition) is what keeps writers apart, this check only catches the overlaps it
  sees.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow.fs as pafs

from mm.backup.catalog import PartitionCatalog, catalog_from_dict, catalog_to_dict
from mm.backup.errors import CatalogError, ConcurrentCommitError
from mm.backup.layout import TMP_DIR, PartitionRef

_VERSION_FILE = re.compile(r"v([0-9]{20})\.json")


def version_name(version: int) -> str:
    return f"v{version:020d}.json"


class CatalogStore(Protocol):
    def load(self, ref: PartitionRef) -> tuple[int, PartitionCatalog]:
        """The newest version and its catalog; (0, an empty catalog) when none."""
        ...

    def commit(self, ref: PartitionRef, expected_version: int, catalog: PartitionCatalog) -> int:
        """Stores ``catalog`` as version ``expected_version + 1`` and returns it;
        raises ConcurrentCommitError when ``expected_version`` is not the newest."""
        ...


def _move(fs: pafs.FileSystem, src: str, dst: str) -> None:
    fs.move(src, dst)


class S3ConditionalPut:
    """Create-if-absent on S3 with a boto3 client: ``put(path, data)`` is True when
    the object was created, False when one of that name already existed.

    ``path`` is a ``pyarrow.fs.S3FileSystem`` path, ``bucket/key``.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def __call__(self, path: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        bucket, _, key = path.partition("/")
        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            # 409 ConditionalRequestConflict: a concurrent conditional put is in flight
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        return True


class FsCatalogStore:
    """:class:`CatalogStore` on a ``pyarrow.fs`` filesystem (see the module docstring).

    ``exclusive_create``: publish by hard link (an atomic create-if-absent); by
    default True on a ``LocalFileSystem`` and False elsewhere. ``conditional_put``:
    publish with it (:class:`S3ConditionalPut`) instead of write-then-read-back.
    """

    def __init__(
        self,
        fs: pafs.FileSystem,
        *,
        exclusive_create: bool | None = None,
        conditional_put: Callable[[str, bytes], bool] | None = None,
    ) -> None:
        self._fs = fs
        self._put = conditional_put
        local = isinstance(fs, pafs.LocalFileSystem)
        self._exclusive = local if exclusive_create is None else exclusive_create
        if self._exclusive and not local:
            raise ValueError("exclusive_create needs a LocalFileSystem (it uses hard links)")

    def _versions(self, ref: PartitionRef) -> list[int]:
        selector = pafs.FileSelector(ref.catalog_dir, allow_not_found=True)
        for attempt in range(5):
            try:
                infos = self._fs.get_file_info(selector)
                break
            except FileNotFoundError:
                # a concurrent first commit is creating the directory while it is
                # listed: pyarrow raises despite allow_not_found (seen 1 in 40 races)
                if attempt == 4:
                    raise
        found = (_VERSION_FILE.fullmatch(i.base_name) for i in infos if i.is_file)
        return sorted(int(m.group(1)) for m in found if m)

    def latest_version(self, ref: PartitionRef) -> int:
        versions = self._versions(ref)
        return versions[-1] if versions else 0

    def _read(self, path: str) -> dict[str, Any]:
        with self._fs.open_input_stream(path) as f:
            data = f.read()
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            return doc
        except ValueError as exc:
            raise CatalogError(f"{path}: not a catalog version document ({exc})") from None

    def load(self, ref: PartitionRef) -> tuple[int, PartitionCatalog]:
        version = self.latest_version(ref)
        if version == 0:
            return 0, PartitionCatalog(ref.region, ref.topic, ref.partition)
        path = f"{ref.catalog_dir}/{version_name(version)}"
        doc = self._read(path)
        if doc.get("version") != version or not isinstance(doc.get("catalog"), dict):
            raise CatalogError(
                f"{path}: expected a document with version {version} and a catalog, "
                f"found version {doc.get('version')!r}"
            )
        catalog = catalog_from_dict(doc["catalog"])
        _check_identity(ref, catalog, path)
        return version, catalog

    def commit(self, ref: PartitionRef, expected_version: int, catalog: PartitionCatalog) -> int:
        _check_identity(ref, catalog, str(ref))
        latest = self.latest_version(ref)
        if latest != expected_version:
            raise ConcurrentCommitError(str(ref), expected_version, latest)
        version = expected_version + 1
        token = uuid.uuid4().hex
        doc = {"version": version, "writer": token, "catalog": catalog_to_dict(catalog)}
        tmp = f"{ref.catalog_dir}/{TMP_DIR}/{token}.json"
        final = f"{ref.catalog_dir}/{version_name(version)}"
        if self._put is not None:
            data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
            if not self._put(final, data):
                raise ConcurrentCommitError(str(ref), expected_version, self.latest_version(ref))
            return version
        self._fs.create_dir(f"{ref.catalog_dir}/{TMP_DIR}", recursive=True)
        with self._fs.open_output_stream(tmp) as out:
            out.write(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode())
        try:
            if self._exclusive:
                self._publish_exclusive(ref, tmp, final, expected_version)
            else:
                self._publish_checked(ref, tmp, final, token, expected_version)
        finally:
            try:
                self._fs.delete_file(tmp)
            except FileNotFoundError:
                pass  # moved into place
        return version

    def _publish_exclusive(self, ref: PartitionRef, tmp: str, final: str, expected: int) -> None:
        try:
            os.link(tmp, final)  # fails if final exists: nobody else's version is replaced
        except FileExistsError:
            raise ConcurrentCommitError(str(ref), expected, self.latest_version(ref)) from None

    def _publish_checked(
        self, ref: PartitionRef, tmp: str, final: str, token: str, expected: int
    ) -> None:
        if self._fs.get_file_info(final).type != pafs.FileType.NotFound:
            raise ConcurrentCommitError(str(ref), expected, self.latest_version(ref))
        _move(self._fs, tmp, final)
        if self._read(final).get("writer") != token:
            raise ConcurrentCommitError(str(ref), expected, None)


def _check_identity(ref: PartitionRef, catalog: PartitionCatalog, where: str) -> None:
    have = (catalog.region, catalog.topic, catalog.partition)
    if have != (ref.region, ref.topic, ref.partition):
        raise CatalogError(
            f"{where}: holds the catalog of {have[0]}/{have[1]}[{have[2]}], expected {ref}"
        )
