"""A table Apache Hudi wrote with its metadata table on (Hudi's default) is refused by every writing command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.apache_hudi import HudiWorker, hudi_write_options, read_hoodie_properties

pytestmark = pytest.mark.hudi


def test_a_table_hudi_wrote_with_its_metadata_table_is_refused(apache_hudi: HudiWorker, tmp_path: Path) -> None:
    base = tmp_path / "mdt"
    options = hudi_write_options(apache_hudi.setup, "mdt", record_key="id", partition_path="part", precombine="ts",
                                 extra={"hoodie.metadata.enable": "true"})
    for batch in range(3):
        apache_hudi.write([{"id": batch * 10 + i, "part": f"p{i % 2}", "ts": batch} for i in range(10)], base,
                          {**options, "hoodie.datasource.write.operation": "insert",
                           "hoodie.parquet.small.file.limit": "0"})
    assert read_hoodie_properties(base).get("hoodie.table.metadata.partitions")
    before = sorted(str(p.relative_to(base)) for p in base.rglob("*"))
    for argv in (["schedule", "--force"], ["cluster", "--force"], ["execute"]):
        done = subprocess.run([sys.executable, "-m", "hudi_clusterd", *argv, "--base-path", str(base)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 4, (argv, done.stderr)
        assert "metadata table" in done.stderr and "hoodie.table.metadata.partitions" in done.stderr, done.stderr
    assert sorted(str(p.relative_to(base)) for p in base.rglob("*")) == before
