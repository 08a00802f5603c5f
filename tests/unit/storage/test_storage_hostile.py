"""Storage refuses URIs outside the table (siblings, traversal, other schemes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.errors import StorageError
from hudi_clusterd.storage import open_storage


@pytest.mark.parametrize("uri", ["file:{base}-evil/p/f.parquet", "file:{base}/p/../../x.parquet",
                                 "file:///etc/passwd", "{base}/../t2/f.parquet", "s3://bucket{base}/f.parquet"])
def test_storage_rel_from_uri_sibling_or_traversal_is_refused(tmp_path: Path, uri: str) -> None:
    base = tmp_path / "t"
    with pytest.raises(StorageError, match="outside the table"):
        open_storage(str(base)).rel_from_uri(uri.format(base=base))
