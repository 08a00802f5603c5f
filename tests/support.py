"""Plain helpers shared by tests (import as ``from tests.support import ...``)."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from hudi_clusterd.formats.log import empty_delete_block, encode_block
from hudi_clusterd.formats.metadata.records import RecordSchema

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = (REPO_ROOT / ".." / "shared").resolve()
# the golden v6 copy-on-write tables of ../shared/reference/hudi-tables/cow (unzipped by the golden_tables fixture)
V6_TABLES = [
    "v6_complexkeygen_hivestyle",
    "v6_empty",
    "v6_nonpartitioned",
    "v6_simplekeygen_hivestyle_no_metafields",
    "v6_simplekeygen_nonhivestyle",
    "v6_simplekeygen_nonhivestyle_overwritetable",
    "v6_timebasedkeygen_nonhivestyle",
]
# the golden copy-on-write tables of table versions 8 and 9 (timeline layout 2), written by Apache Hudi 1.x
V8_V9_TABLES = [
    "v8_simplekeygen_nonhivestyle_overwritetable",
    "v9_txns_complex_meta",
    "v9_txns_complex_nometa",
    "v9_txns_nonpart_meta",
    "v9_txns_nonpart_nometa",
    "v9_txns_simple_meta",
    "v9_txns_simple_nometa",
    "v9_txns_simple_overwrite",
]


# hypothesis settings of the fuzz tests of hostile input
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def require_shared(*parts: str) -> Path:
    """Return a path under ../shared, or skip the test with a clear reason when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared not found beside the repository ({path}); this test needs the shared references")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


METADATA_INIT = {6: "00000000000000010", 9: "00000000000000000"}
"""The instant Apache Hudi initialises a metadata table with, by table version."""


def new_metadata_table(base: Path, version: int) -> None:
    """Lay out ``base/.hoodie/metadata`` as Apache Hudi leaves it right after initialising a ``files`` partition
    for a data table of ``version`` (6 or 9): its properties, the initial deltacommit and one file group holding
    an empty delete block."""
    layout2 = version >= 8
    mdt = base / ".hoodie" / "metadata"
    timeline = mdt / ".hoodie" / ("timeline" if layout2 else "")
    timeline.mkdir(parents=True)
    props = {"hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": str(version),
             "hoodie.table.name": "t_metadata", "hoodie.table.base.file.format": "HFILE"}
    if layout2:
        props |= {"hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline"}
    (mdt / ".hoodie" / "hoodie.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    init = METADATA_INIT[version]
    files = mdt / "files"
    files.mkdir()
    (files / ".hoodie_partition_metadata").write_text(f"commitTime={init}\npartitionDepth=1\n")
    (files / f".files-0000-0_{init}.log.1_0-0-0").write_bytes(encode_block(empty_delete_block(init)))
    done = f"{init}_{init[:-3]}999.deltacommit" if layout2 else f"{init}.deltacommit"
    for name in (f"{init}.deltacommit.requested", f"{init}.deltacommit.inflight", done):
        (timeline / name).write_bytes(b"")


def add_metadata_table(base: Path) -> Path:
    """Give the version 6 table at ``base`` (no metadata table yet) a metadata table of ``files`` as Hudi
    initialises it; the folder of the metadata table's timeline."""
    props = base / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.metadata.partitions=files\n")
    new_metadata_table(base, 6)
    return base / ".hoodie" / "metadata" / ".hoodie"


def column_stats_fields(schema: RecordSchema) -> tuple[str, ...]:
    """The fields of ``HoodieMetadataColumnStats`` in a metadata-table record schema."""
    field = next(f for f in json.loads(schema.text)["fields"] if f["name"] == "ColumnStatsMetadata")
    body = next(b for b in field["type"] if isinstance(b, dict))
    return tuple(str(f["name"]) for f in body["fields"])


def raw_log_blocks(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, block length, reverse pointer) of every block of the log file ``data``, read with struct alone
    (no code under test)."""
    out = []
    pos = 0
    while pos < len(data):
        length = struct.unpack_from(">q", data, pos + 6)[0]
        end = pos + 14 + length
        out.append((pos, length, struct.unpack_from(">q", data, end - 8)[0]))
        pos = end
    assert pos == len(data)
    return out


def race(n: int, attempt: Callable[[int], object]) -> list[object]:
    """``attempt(i)`` for ``i`` in ``range(n)`` on ``n`` threads released at once; what each returned, or the
    exception a loser got."""
    results: list[object] = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = attempt(i)
        except Exception as e:  # the race's losers report what they got
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
