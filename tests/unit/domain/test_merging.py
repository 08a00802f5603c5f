"""A merge-on-read table's merge setting, per table version, and the refusals naming the key."""

from __future__ import annotations

import pytest

from hudi_clusterd.domain.merging import MergeMode, Payload, Release, TableMerging
from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.errors import UnsupportedTableError
from hudi_clusterd.formats.log import MergeRule

EVENT_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"


def mor(version: int, **keys: str) -> TableConfig:
    layout = "1" if version == 6 else "2"
    return TableConfig({"hoodie.table.version": str(version), "hoodie.timeline.layout.version": layout,
                        "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.name": "t",
                        "hoodie.table.precombine.field": "ts", **keys})


def test_version_6_merges_by_its_payload_class_defaulting_to_overwrite_with_latest() -> None:
    assert mor(6).merging == TableMerging(payload=Payload.OVERWRITE_WITH_LATEST)
    assert mor(6, **{"hoodie.compaction.payload.class": Payload.DEFAULT.value}).merging.payload is Payload.DEFAULT


def test_version_8_prefers_the_strategy_id_and_version_9_the_mode() -> None:
    both = {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.record.merge.strategy.id": COMMIT_ID}
    assert mor(8, **both).merging.mode is MergeMode.COMMIT_TIME
    assert mor(9, **both).merging.mode is MergeMode.EVENT_TIME
    assert mor(9, **{"hoodie.record.merge.strategy.id": EVENT_ID}).merging.mode is MergeMode.EVENT_TIME
    assert mor(9).merging.mode is MergeMode.EVENT_TIME


@pytest.mark.parametrize(("version", "key", "value", "named"), [
    (6, "hoodie.compaction.payload.class", "com.example.MyPayload",
     "hoodie.compaction.payload.class=com.example.MyPayload is not merged (supported: "
     "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload, "),
    (9, "hoodie.record.merge.mode", "CUSTOM",
     "hoodie.record.merge.mode=CUSTOM is not merged (supported: COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING)"),
    (8, "hoodie.record.merge.strategy.id", "00000000-0000-0000-0000-000000000000",
     "hoodie.record.merge.strategy.id=00000000-0000-0000-0000-000000000000 is not merged (supported: "),
    (9, "hoodie.table.partial.update.mode", "IGNORE_DEFAULTS",
     "hoodie.table.partial.update.mode=IGNORE_DEFAULTS: partial updates are not merged (supported: NONE)"),
    (9, "hoodie.table.cdc.enabled", "true", "hoodie.table.cdc.enabled=true: merge-on-read tables with change data"),
    (9, "hoodie.populate.meta.fields", "false", "hoodie.populate.meta.fields=false: a merge-on-read table's log"),
])
def test_a_table_the_daemon_cannot_merge_is_refused_in_one_line_naming_the_key(
        version: int, key: str, value: str, named: str) -> None:
    with pytest.raises(UnsupportedTableError) as e:
        mor(version, **{key: value}).check_readable("/t/.hoodie/hoodie.properties")
    message = str(e.value)
    assert message.startswith(f"/t/.hoodie/hoodie.properties: {named}")
    assert "\n" not in message


def test_copy_on_write_tables_ignore_the_merge_keys_and_our_writer_refuses_merge_on_read() -> None:
    cow = TableConfig({**mor(9).raw, "hoodie.table.type": "COPY_ON_WRITE", "hoodie.record.merge.mode": "CUSTOM"})
    cow.check_readable("src")
    mor(9).check_writable("src", clustering=True)
    with pytest.raises(UnsupportedTableError, match=r"hoodie\.table\.type=MERGE_ON_READ: hudi-clusterd.s own writer"):
        mor(9).check_writable("src")


def test_the_rule_of_a_table_follows_the_release_only_on_version_6() -> None:
    v6 = mor(6).merging
    assert MergeRule.of_table(v6, "ts", Release.HUDI_0_15) == MergeRule.of_payload(
        Payload.OVERWRITE_WITH_LATEST, "ts", Release.HUDI_0_15)
    assert MergeRule.of_table(v6, "ts", Release.HUDI_1_X) == MergeRule.of_mode(MergeMode.COMMIT_TIME, "ts")
    v9 = mor(9).merging
    assert MergeRule.of_table(v9, "ts", Release.HUDI_0_15) == MergeRule.of_table(v9, "ts", Release.HUDI_1_X)


def test_release_names_parse_and_a_wrong_one_names_the_choices() -> None:
    assert Release.parse(" HUDI-1.X ") is Release.HUDI_1_X
    with pytest.raises(ValueError, match=r"must be hudi-0\.15 or hudi-1\.x, got .hudi-2."):
        Release.parse("hudi-2")


def test_only_version_6_merge_on_read_tables_block_compaction_while_clustering_is_pending() -> None:
    assert mor(6).clustering_blocks_compaction
    assert not mor(9).clustering_blocks_compaction
    assert not TableConfig({**mor(6).raw, "hoodie.table.type": "COPY_ON_WRITE"}).clustering_blocks_compaction
