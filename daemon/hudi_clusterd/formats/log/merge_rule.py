"""Which record wins when a file slice's records of one key meet, per table and Hudi release.

Hudi 1.x tables name a merge mode (``hoodie.record.merge.mode``); table version 6 names a payload class
(``hoodie.compaction.payload.class``), which Hudi 0.15 and Hudi 1.x read differently:

- **COMMIT_TIME_ORDERING** (1.x): the later record wins, log against log and log against base; a delete wins.
- **EVENT_TIME_ORDERING** (1.x): a later record wins when its ordering value is at least the held one's; a
  delete whose ordering value is Hudi's default (``Integer 0``, what a SQL DELETE writes) always wins and any
  later record replaces it; any other delete of a DELETE block loses only to a held value of the same Java class
  that is greater, and a later record replaces it when its ordering value is at least the delete's. The same
  rules merge the logs' winner with the base row.
- **0.15 payloads**: log against log, every payload pre-combines by ordering (the later record wins ties) and a
  record after a DELETE block's delete wins whatever its ordering (natural order); against the base row,
  ``OverwriteWithLatestAvroPayload`` takes the log record whatever its ordering, ``DefaultHoodieRecordPayload`` and
  ``EventTimeAvroPayload`` keep the base row when its ordering value is greater; a DELETE block's delete always
  removes the base row.
- **1.x reading a version-6 table** infers the mode from the payload: OverwriteWithLatest → COMMIT_TIME, Default
  and EventTime → EVENT_TIME.
"""

from __future__ import annotations

from dataclasses import dataclass

from hudi_clusterd.domain.merging import MergeMode, Payload, Release, TableMerging
from hudi_clusterd.errors import UnsupportedTableError

__all__ = ["MergeMode", "MergeRule", "Payload", "Release"]


@dataclass(frozen=True)
class MergeRule:
    """How records of one key are merged.

    ``log_by_ordering``: a later log record replaces the held one only when its ordering value is at least the
    held one's, and a DELETE block's delete with a non-default ordering value loses to a greater held value of
    the same class. ``base_by_ordering``: the logs' winning record replaces the base row only when its ordering
    value is at least the base row's. ``deletes_by_ordering_against_base``: a DELETE block's delete with a
    non-default ordering value keeps a base row of the same class whose value is greater.
    ``natural_order_after_delete``: a record after a DELETE block's delete replaces it whatever its ordering."""

    ordering_field: str | None
    log_by_ordering: bool
    base_by_ordering: bool
    deletes_by_ordering_against_base: bool
    natural_order_after_delete: bool

    @classmethod
    def of_mode(cls, mode: MergeMode | str, ordering_field: str | None) -> MergeRule:
        """The rule of a 1.x merge mode. Raises ``UnsupportedTableError`` for another mode."""
        try:
            mode = MergeMode(mode)
        except ValueError:
            raise UnsupportedTableError(
                f"hoodie.record.merge.mode={mode} is not merged (supported: "
                f"{', '.join(m.value for m in MergeMode)})") from None
        by_ordering = mode is MergeMode.EVENT_TIME
        return cls(ordering_field, by_ordering, by_ordering, by_ordering, natural_order_after_delete=False)

    @classmethod
    def of_payload(cls, payload: Payload | str, ordering_field: str | None, release: Release | str) -> MergeRule:
        """The rule of a version-6 table's payload class as ``release`` merges it. Raises
        ``UnsupportedTableError`` for another payload class."""
        try:
            payload = Payload(payload)
        except ValueError:
            raise UnsupportedTableError(
                f"hoodie.compaction.payload.class={payload} is not merged (supported: "
                f"{', '.join(p.value for p in Payload)})") from None
        if Release(release) is Release.HUDI_1_X:
            mode = MergeMode.COMMIT_TIME if payload is Payload.OVERWRITE_WITH_LATEST else MergeMode.EVENT_TIME
            return cls.of_mode(mode, ordering_field)
        return cls(ordering_field, log_by_ordering=True, base_by_ordering=payload is not Payload.OVERWRITE_WITH_LATEST,
                   deletes_by_ordering_against_base=False, natural_order_after_delete=True)

    @classmethod
    def of_table(cls, merging: TableMerging, ordering_field: str | None, release: Release | str) -> MergeRule:
        """The rule of a table's merge setting; ``release`` decides a version-6 table's (its payload class)."""
        if merging.payload is not None:
            return cls.of_payload(merging.payload, ordering_field, release)
        return cls.of_mode(merging.mode or MergeMode.EVENT_TIME, ordering_field)
