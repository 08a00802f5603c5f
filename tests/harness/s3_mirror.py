"""A table on the S3 test server seen as a local folder: :class:`S3Mirror` copies what the bucket holds under the
table's prefix into a folder of its own, fetching only the objects that are new or changed since its last copy and
deleting the ones gone, so that the checks written for local tables (the timeline helpers of
``tests/harness/daemon_harness.py``, the storage listing of ``tests/harness/metadata_checks.py``) read an S3 table
as it is at that moment."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import ClientError


class S3Mirror:
    """The objects under ``uri`` (``s3://`` or ``s3a://`` on the server ``s3``, a ``tests.harness.servers.S3Server``)
    as files under ``root``; :meth:`sync` brings the copy up to date."""

    def __init__(self, s3: Any, uri: str, root: Path) -> None:
        parts = urlsplit(uri)
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/") + "/"
        self.root = root
        self._client = s3.boto3()
        self._etags: dict[str, str] = {}

    def listing(self, under: str = "") -> dict[str, tuple[int, str]]:
        """Every object under the table's prefix (under its folder ``under`` when given, ``"a/b/"``): its path
        relative to the base path -> (size, ETag)."""
        found: dict[str, tuple[int, str]] = {}
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + under)
        for page in pages:
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(self.prefix):]
                if rel and not rel.endswith("/"):
                    found[rel] = (int(obj["Size"]), str(obj["ETag"]))
        return found

    def exists(self, rel: str) -> bool:
        """Whether the object at ``rel`` (relative to the base path) is in the bucket now."""
        try:
            self._client.head_object(Bucket=self.bucket, Key=self.prefix + rel)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def sync(self, under: str = "") -> Path:
        """Copy what changed since the last call; returns the folder, now holding exactly the table's objects (an
        object deleted between the listing and its download is left out, as if listed a moment later). With
        ``under``, only the paths that start with it are brought up to date: a folder of the table (``"a/b/"``)
        or any prefix of paths (``"a/b/2026"``: the files of one instant), one listing either way."""
        listing = self.listing(under)
        self.root.mkdir(parents=True, exist_ok=True)
        parent = self.root / under.rsplit("/", 1)[0] if "/" in under else self.root
        for path in sorted(parent.rglob("*") if parent.is_dir() else [], reverse=True):
            rel = path.relative_to(self.root).as_posix()
            if not rel.startswith(under):
                continue
            if path.is_file() and rel not in listing:
                path.unlink()
                self._etags.pop(rel, None)
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        for rel, (_, etag) in listing.items():
            target = self.root / rel
            if self._etags.get(rel) == etag and target.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._client.download_file(self.bucket, self.prefix + rel, str(target))
            except ClientError as e:  # deleted since the listing (a writer's marker or temporary file)
                if e.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey"):
                    raise
                target.unlink(missing_ok=True)
                self._etags.pop(rel, None)
                continue
            self._etags[rel] = etag
        return self.root
