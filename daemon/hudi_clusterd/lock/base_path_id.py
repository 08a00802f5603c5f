"""The id Hudi 1.x's implicit lock providers derive from a table's base path
(``DynamoDBBasedImplicitPartitionKeyLockProvider``'s partition key, ``ZookeeperBasedImplicitBasePathLockProvider``'s
path): ``HashID.generateXXHashAsString(FSUtils.s3aToS3(base_path), BITS_64)``. The writers' exact string is hashed
(no normalisation beyond ``s3a://`` read as ``s3://``)."""

from __future__ import annotations

import re

from hudi_clusterd.formats.metadata.hash_id import xxhash_hex

__all__ = ["base_path_id", "s3a_to_s3"]

_S3A = re.compile(r"^s3a://", re.IGNORECASE | re.ASCII)


def s3a_to_s3(path: str) -> str:
    """Hudi's ``FSUtils.s3aToS3``: a leading ``s3a://`` (ASCII letters in any case) becomes ``s3://``."""
    return _S3A.sub("s3://", path, count=1)


def base_path_id(base_path: str) -> str:
    """The upper-case hex XXHash64 of ``s3a_to_s3(base_path)``, as Hudi's implicit lock providers compute it."""
    return xxhash_hex(s3a_to_s3(base_path))
