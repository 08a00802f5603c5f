from __future__ import annotations

import io
import json

import fastavro
import pytest

from hudi_clusterd.domain.plan import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats import avro
from tests.support import require_shared

SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"

SHIPPED = ["HoodieRequestedReplaceMetadata", "HoodieClusteringPlan", "HoodieClusteringGroup", "HoodieSliceInfo",
           "HoodieClusteringStrategy", "HoodieRollbackPlan", "HoodieRollbackMetadata", "HoodieInstantInfo",
           "HoodieReplaceCommitMetadata", "HoodieCommitMetadata", "HoodieCleanerPlan", "HoodieCleanMetadata"]


def _plan() -> ClusteringPlan:
    slices = (
        SliceInfo("f1-0", "2024/01/01", "file:/t/2024/01/01/f1-0_0-1-2_20240101000000001.parquet"),
        SliceInfo("f2-0", "2024/01/01", "file:/t/2024/01/01/f2-0_1-1-3_20240101000000002.parquet"),
    )
    group = ClusteringGroup(slices, 2, {"TOTAL_IO_READ_MB": 12.5, "TOTAL_IO_WRITE_MB": 12.5, "TOTAL_IO_MB": 25.0,
                                        "TOTAL_LOG_FILES_SIZE": 0.0, "TOTAL_LOG_FILES": 0.0})
    strategy = ClusteringStrategy("org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy",
                                  {SORT_COLUMNS_PARAM: "lat,lon"})
    return ClusteringPlan((group,), strategy)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_schema_parses_self_contained(name: str) -> None:
    parsed = fastavro.parse_schema(json.loads(avro.schema_json(name)))
    assert parsed["name"].endswith(name)


def test_requested_replace_round_trips() -> None:
    meta = RequestedReplaceMetadata.for_plan(_plan())
    assert avro.decode_requested_replace(avro.encode_requested_replace(meta), "x") == meta


def test_requested_replace_decodes_with_hudi_writer_schema_exactly() -> None:
    ref = require_shared("reference", "hudi-avro", "HoodieRequestedReplaceMetadata.writer-schema.json")
    data = avro.encode_requested_replace(RequestedReplaceMetadata.for_plan(_plan()))
    reader = fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(json.loads(ref.read_text())))
    assert reader.metadata["avro.schema"] == ref.read_text().strip()  # the exact schema Hudi embeds
    (record,) = list(reader)
    assert record["operationType"] == "CLUSTER"
    plan = record["clusteringPlan"]
    assert plan["preserveHoodieMetadata"] is True and plan["version"] == 1
    assert plan["strategy"]["strategyParams"] == {SORT_COLUMNS_PARAM: "lat,lon"}
    assert [s["fileId"] for s in plan["inputGroups"][0]["slices"]] == ["f1-0", "f2-0"]
    assert plan["inputGroups"][0]["numOutputFileGroups"] == 2
    assert "missingSchedulePartitions" not in plan  # a 1.x-only field


def test_golden_insert_overwrite_requested_is_not_clustering(golden_tables) -> None:  # type: ignore[no-untyped-def]
    path = golden_tables / "v6_simplekeygen_nonhivestyle_overwritetable/.hoodie"
    path = path / "20240707001303088.replacecommit.requested"
    meta = avro.decode_requested_replace(path.read_bytes(), str(path))
    assert meta is not None and not meta.is_clustering


@pytest.mark.parametrize("payload", [b"{\"not\": \"avro\"}", b"Obj\x01garbage", b"Obj"])
def test_decode_requested_replace_non_avro_raises_naming_file(payload: bytes) -> None:
    with pytest.raises(MetadataDecodeError, match=r"20240101000000001\.replacecommit\.requested"):
        avro.decode_requested_replace(payload, ".hoodie/20240101000000001.replacecommit.requested")


def test_decode_requested_replace_empty_file_is_not_a_plan() -> None:
    assert avro.decode_requested_replace(b"", "x") is None


def test_rollback_records_encode_and_decode() -> None:
    plan = {"instantToRollback": {"commitTime": "20240101000000001", "action": "commit"},
            "RollbackRequests": [{"partitionPath": "p", "fileId": "f", "latestBaseInstant": "20240101000000001",
                                  "filesToBeDeleted": ["file:/t/p/f.parquet"], "logBlocksToBeDeleted": None}],
            "version": 1}
    assert avro.decode_ocf(avro.encode_record("HoodieRollbackPlan", plan), "x") == plan
