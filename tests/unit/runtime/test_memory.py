"""Reading many Hudi-sized footers leaves the driver's memory where it was once large blocks are mapped."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_clusterd.runtime.memory import map_large_blocks

FILES = 120
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
BLOOM_FILTER_CHARS = 430_000  # the size of Hudi's bloom filter string in a base file of 20,000 rows

_READ_FOOTERS = """
import gc, sys
from pathlib import Path
from hudi_clusterd.ordering.quality import read_boxes
from hudi_clusterd.runtime.memory import map_large_blocks

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

if sys.argv[2] == "mapped":
    assert map_large_blocks()
files = sorted(str(p) for p in Path(sys.argv[1]).glob("*.parquet"))
read_boxes(files[:1], ["x"])
gc.collect()
before = rss_mib()
read_boxes(files, ["x"])
gc.collect()
print(rss_mib() - before)
"""


def _growth_mib(folder: Path, mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", _READ_FOOTERS, str(folder), mode], capture_output=True, text=True,
                         check=True, timeout=120)
    return float(out.stdout.strip())


@pytest.mark.skipif(not GLIBC, reason="needs Linux's /proc and glibc's mallopt")
def test_footers_with_bloom_filters_do_not_stay_in_the_heap(tmp_path: Path) -> None:
    # Given files whose footers carry a bloom filter as large as Hudi's (each file a different one)
    for i in range(FILES):
        meta = {b"org.apache.hudi.bloomfilter": (f"{i:06d}" * (BLOOM_FILTER_CHARS // 6)).encode()}
        table = pa.table({"x": [float(i), float(i) + 1]}).replace_schema_metadata(meta)
        pq.write_table(table, tmp_path / f"f{i:03d}.parquet")
    # When a fresh process reads every footer, with large blocks mapped and with glibc's default behaviour
    mapped, default = _growth_mib(tmp_path, "mapped"), _growth_mib(tmp_path, "default")
    # Then with them mapped the process keeps less than a tenth of the footers' 49 MiB (glibc's default keeps
    # about 115 MiB)
    assert mapped < 5, (mapped, default)


def test_map_large_blocks_reports_whether_it_took_effect() -> None:
    assert map_large_blocks() is GLIBC
