"""Clustering plans whose slices have log files: Hudi's log-only slices (``dataFilePath`` empty) and
``deltaFilePaths`` read and written as Hudi writes them (full paths, like ``dataFilePath``)."""

from __future__ import annotations

import pytest

from hudi_clusterd.domain.file_group import FileSlice
from hudi_clusterd.domain.log_file import LogFile
from hudi_clusterd.domain.plan import (
    METRIC_LOG_FILES,
    METRIC_LOG_FILES_SIZE,
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hudi_clusterd.domain.planner import clustering_group
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats.avro import (
    decode_requested_replace,
    encode_requested_replace,
    encode_requested_replace_v2,
)
from tests.builders import make_base_file, make_policy

T1, T2, T3 = "20240101000000001", "20240101000000002", "20240101000000003"
ROOT = "s3a://bucket/t"


def _log(file_id: str, instant: str, version: int = 1, size: int = 10) -> LogFile:
    lf = LogFile.parse("p", f".{file_id}_{instant}.log.{version}_0-1-2", size)
    assert lf is not None
    return lf


def test_a_log_only_slice_takes_its_base_instant_from_its_first_log_file() -> None:
    s = SliceInfo.from_avro({"fileId": "a", "partitionPath": "p", "dataFilePath": "",
                             "deltaFilePaths": [f"{ROOT}/p/.a_{T2}.log.1_0-1-2", f"{ROOT}/p/.a_{T1}.log.2_0-1-2",
                                                f"{ROOT}/p/.a_{T1}.log.1_0-1-2"]})
    assert s.base_instant == T1
    assert s.log_file_names == {f".a_{T2}.log.1_0-1-2", f".a_{T1}.log.2_0-1-2", f".a_{T1}.log.1_0-1-2"}


@pytest.mark.parametrize(("data", "deltas", "match"), [
    ("", [], "dataFilePath '' is not a base file"),
    ("", [f"{ROOT}/p/.b_{T1}.log.1_0-1-2"], "deltaFilePaths .* is not a log file of file group 'a'"),
    ("", [f"{ROOT}/p/a_0-1-2_{T1}.parquet"], "deltaFilePaths .* is not a log file"),
    ("", [f"{ROOT}/p/.a_{T1}.log.1_0-1-2.cdc"], "deltaFilePaths .* is not a log file"),
])
def test_slices_whose_files_are_not_the_groups_are_refused(data: str, deltas: list[str], match: str) -> None:
    with pytest.raises(MetadataDecodeError, match=match):
        SliceInfo.from_avro({"fileId": "a", "partitionPath": "p", "dataFilePath": data, "deltaFilePaths": deltas})


@pytest.mark.parametrize("encode", [encode_requested_replace, encode_requested_replace_v2])
def test_delta_file_paths_survive_both_plan_encodings(encode) -> None:  # type: ignore[no-untyped-def]
    slices = (SliceInfo("a", "p", f"{ROOT}/p/a_0-1-2_{T1}.parquet", (f"{ROOT}/p/.a_{T2}.log.1_0-1-2",)),
              SliceInfo("b", "p", "", (f"{ROOT}/p/.b_{T2}.log.1_0-1-2", f"{ROOT}/p/.b_{T3}.log.1_0-1-2")))
    meta = RequestedReplaceMetadata.for_plan(ClusteringPlan((ClusteringGroup(slices),), ClusteringStrategy("S")))
    back = decode_requested_replace(encode(meta), "test")
    assert back is not None and back.clustering_plan is not None
    [group] = back.clustering_plan.input_groups
    assert group.slices == slices
    assert [s.base_instant for s in group.slices] == [T1, T2]


def test_a_group_over_slices_with_logs_names_them_by_full_path_as_hudi_does() -> None:
    base = make_base_file("p", "a", T1, size=1000)
    slices = [FileSlice("p", "a", T1, base, (_log("a", T1), _log("a", T1, 2, size=30))),
              FileSlice("p", "b", T2, None, (_log("b", T2, size=5),))]
    group = clustering_group(slices, make_policy(), lambda f: f"{ROOT}/{f.relative_path}")
    a, b = group.slices
    assert a.data_file_path == f"{ROOT}/p/{base.file_name}"
    assert a.delta_file_paths == (f"{ROOT}/p/.a_{T1}.log.1_0-1-2", f"{ROOT}/p/.a_{T1}.log.2_0-1-2")
    assert (b.data_file_path, b.base_instant) == ("", T2)
    assert b.delta_file_paths == (f"{ROOT}/p/.b_{T2}.log.1_0-1-2",)
    assert group.metrics[METRIC_LOG_FILES] == 3.0 and group.metrics[METRIC_LOG_FILES_SIZE] == 45.0
