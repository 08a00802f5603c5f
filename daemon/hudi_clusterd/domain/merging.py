"""How a merge-on-read table says its records of one key are merged, and whose semantics the daemon follows.

Table versions 8 and 9 name a merge mode (``hoodie.record.merge.mode``; on version 8 the merge strategy id
``hoodie.record.merge.strategy.id`` stands for it when the mode is absent); version 6 names a payload class
(``hoodie.compaction.payload.class``), which Hudi 0.15 and Hudi 1.x merge differently for
OverwriteWithLatestAvroPayload (the release is the daemon's per-table setting, `Release`). Anything else (CUSTOM,
another payload or merger) is Java code the daemon cannot run: `TableMerging` refuses it in one line naming the key
and the supported values; `TableConfig.merging` picks the setting by table version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from hudi_clusterd.errors import UnsupportedTableError

RECORD_MERGE_MODE = "hoodie.record.merge.mode"
MERGE_STRATEGY_ID = "hoodie.record.merge.strategy.id"
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
PARTIAL_UPDATE_MODE = "hoodie.table.partial.update.mode"
CDC_ENABLED = "hoodie.table.cdc.enabled"


class MergeMode(StrEnum):
    """``hoodie.record.merge.mode`` values the merge serves (CUSTOM is refused)."""

    COMMIT_TIME = "COMMIT_TIME_ORDERING"
    EVENT_TIME = "EVENT_TIME_ORDERING"


class Payload(StrEnum):
    """The payload classes of version-6 tables the merge serves."""

    OVERWRITE_WITH_LATEST = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
    DEFAULT = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    EVENT_TIME = "org.apache.hudi.common.model.EventTimeAvroPayload"


class Release(StrEnum):
    """Whose semantics a version-6 table is merged with (the two disagree for OverwriteWithLatest)."""

    HUDI_0_15 = "hudi-0.15"
    HUDI_1_X = "hudi-1.x"

    @classmethod
    def parse(cls, raw: str) -> Release:
        """A release named as the setting spells it; ``ValueError`` naming the choices otherwise."""
        try:
            return cls(raw.strip().lower())
        except ValueError:
            raise ValueError(f"must be {' or '.join(r.value for r in cls)}, got {raw!r}") from None


DEFAULT_RELEASE = Release.HUDI_0_15
"""Version-6 tables are merged as Hudi 0.14/0.15 (the releases whose native version 6 is) merge them."""

STRATEGY_MODES = {
    "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5": MergeMode.EVENT_TIME,
    "ce9acb64-bde0-424c-9b91-f6ebba25356d": MergeMode.COMMIT_TIME,
}
"""Hudi's built-in merge strategy ids and the merge modes they stand for (version 8 without a mode)."""
DEFAULT_PAYLOAD = Payload.OVERWRITE_WITH_LATEST
DEFAULT_MODE = MergeMode.EVENT_TIME


@dataclass(frozen=True, slots=True)
class TableMerging:
    """A table's merge setting: a merge mode (versions 8 and 9) or a payload class (version 6)."""

    mode: MergeMode | None = None
    payload: Payload | None = None

    @classmethod
    def of_payload_class(cls, props: Mapping[str, str]) -> TableMerging:
        """A version-6 table's payload class; `UnsupportedTableError` naming the key for another one."""
        _check_partial(props)
        raw = props.get(PAYLOAD_CLASS, "").strip() or DEFAULT_PAYLOAD.value
        try:
            return cls(payload=Payload(raw))
        except ValueError:
            raise UnsupportedTableError(
                f"{PAYLOAD_CLASS}={raw} is not merged (supported: {', '.join(p.value for p in Payload)})") from None

    @classmethod
    def of_merge_mode(cls, props: Mapping[str, str], *, strategy_first: bool) -> TableMerging:
        """A 1.x table's merge mode, or the mode its merge strategy id stands for (first, with
        ``strategy_first``: version 8; otherwise only without a mode); `UnsupportedTableError` naming the key for
        a CUSTOM mode or another strategy."""
        _check_partial(props)
        strategy = props.get(MERGE_STRATEGY_ID, "").strip()
        raw_mode = props.get(RECORD_MERGE_MODE, "").strip().upper()
        if strategy and (strategy_first or not raw_mode):
            if strategy not in STRATEGY_MODES:
                raise UnsupportedTableError(
                    f"{MERGE_STRATEGY_ID}={strategy} is not merged (supported: "
                    f"{', '.join(f'{k} ({v.value})' for k, v in STRATEGY_MODES.items())})")
            return cls(mode=STRATEGY_MODES[strategy])
        if not raw_mode:
            return cls(mode=DEFAULT_MODE)
        try:
            return cls(mode=MergeMode(raw_mode))
        except ValueError:
            raise UnsupportedTableError(
                f"{RECORD_MERGE_MODE}={props[RECORD_MERGE_MODE]} is not merged (supported: "
                f"{', '.join(m.value for m in MergeMode)})") from None


def _check_partial(props: Mapping[str, str]) -> None:
    partial = props.get(PARTIAL_UPDATE_MODE, "").strip().upper()
    if partial not in ("", "NONE"):
        raise UnsupportedTableError(f"{PARTIAL_UPDATE_MODE}={props[PARTIAL_UPDATE_MODE]}: partial updates are not "
                                    "merged (supported: NONE)")
