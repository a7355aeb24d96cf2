"""Opening ``backup.path``: the ``pyarrow.fs`` filesystem, the prefix, the catalog store.

``s3://bucket/prefix`` goes through ``pyarrow.fs.FileSystem.from_uri`` (its query
options, e.g. ``?endpoint_override=host:port&scheme=http&region=...``, configure
the client; credentials come from the usual AWS chain). The catalog on S3 is
committed with a conditional put through boto3
(:class:`~mm.backup.catalog_store.S3ConditionalPut`), built from the same
options, so two writers of one partition cannot both commit a version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyarrow.fs as pafs

from mm.backup.catalog_store import FsCatalogStore, S3ConditionalPut


@dataclass(frozen=True)
class Storage:
    fs: pafs.FileSystem
    prefix: str
    catalogs: FsCatalogStore


def _s3_client(uri: str) -> Any:
    import boto3

    query = {k: v[-1] for k, v in parse_qs(urlparse(uri).query).items()}
    endpoint = query.get("endpoint_override")
    if endpoint and "://" not in endpoint:
        endpoint = f"{query.get('scheme', 'https')}://{endpoint}"
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=query.get("region"),
        aws_access_key_id=query.get("access_key"),
        aws_secret_access_key=query.get("secret_key"),
    )


def open_storage(path: str) -> Storage:
    """``path``: a resolved ``backup.path`` (:attr:`BackupSettings.path`)."""
    fs, prefix = pafs.FileSystem.from_uri(path)
    if isinstance(fs, pafs.S3FileSystem):
        put = S3ConditionalPut(_s3_client(path))
        return Storage(fs, prefix, FsCatalogStore(fs, conditional_put=put))
    return Storage(fs, prefix, FsCatalogStore(fs))
